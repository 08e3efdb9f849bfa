"""Reads of deposits: the newest-first listing, with paging that stays fast at any depth.

The listing is the hottest read of the service, so it reads plain rows and builds the records
itself (the serializers in deposits/api describe the same shape for the schema).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from django.db import connection
from django.utils.dateparse import parse_datetime

from deposits.models import Deposit
from lats.models import Lat

FILTERS = {
    "liquidTokenAddress": "lat_id__in",
    "sender": "sender",
    "receiver": "receiver",
    "asset": "asset",
}
_COLUMNS = (
    "sender",
    "receiver",
    "asset",
    "lat__proxy_address",
    "amount",
    "shares",
    "block_number",
    "created_at",
)
_TABLE = Deposit._meta.db_table
_LAT_TABLE = Lat._meta.db_table
# One statement for the unfiltered page: the total (the largest dense rank) and the page,
# a range of ranks, both from the unique index on seq.
_PAGE_SQL = f"""
WITH top AS (SELECT MAX(seq) AS n FROM {_TABLE})
SELECT top.n, d.sender, d.receiver, d.asset, l.proxy_address, d.amount, d.shares,
       d.block_number, d.created_at
FROM top
LEFT JOIN {_TABLE} d ON d.seq <= top.n - %s AND d.seq > top.n - %s - %s
LEFT JOIN {_LAT_TABLE} l ON l.id = d.lat_id
ORDER BY d.seq DESC
"""


@dataclass(frozen=True)
class DepositPage:
    rows: list[dict[str, Any]]
    total: int


def _iso(value: datetime | str) -> str:
    """DRF's DateTimeField output: ISO 8601 in UTC with a Z."""
    if isinstance(value, str):  # SQLite through a raw cursor
        value = parse_datetime(value)
    text = value.astimezone(UTC).isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text


def _record(sender, receiver, asset, lat, amount, shares, block, created) -> dict[str, Any]:
    return {
        "sender": sender,
        "receiver": receiver,
        "asset": asset,
        "liquidTokenAddress": lat,
        "amount": str(int(Decimal(amount))),
        "shares": str(int(Decimal(shares))),
        "createdAtBlock": block,
        "createdAt": _iso(created),
    }


def deposit_page(*, skip: int, take: int, filters: dict[str, str]) -> DepositPage:
    """Deposits newest first (block desc, log index desc) and how many match.

    Unfiltered, the page is a range of the dense `seq` rank and the total is the largest rank:
    one statement, two index lookups, whatever the depth. Filtered, the filter's own index
    serves both the count and the page.
    """
    if not filters:
        with connection.cursor() as cursor:
            cursor.execute(_PAGE_SQL, [skip, skip, take])
            rows = cursor.fetchall()
        total = (rows[0][0] or 0) if rows else 0
        return DepositPage(
            rows=[_record(*row[1:]) for row in rows if row[1] is not None], total=total
        )
    lookups = {FILTERS[name]: value for name, value in filters.items()}
    if "lat_id__in" in lookups:
        # Resolve the LAT first so that the filter uses the (lat, block, log) index alone.
        lookups["lat_id__in"] = list(
            Lat.objects.filter(proxy_address=lookups["lat_id__in"]).values_list("id", flat=True)
        )
    queryset = Deposit.objects.filter(**lookups)
    total = queryset.count()
    rows = queryset.order_by("-block_number", "-log_index", "-chain_id").values_list(*_COLUMNS)[
        skip : skip + take
    ]
    return DepositPage(rows=[_record(*row) for row in rows], total=total)
