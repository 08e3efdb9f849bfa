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
from django.db.models import Max, Q
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
    "tx_hash",
    "log_index",
    "chain_id",
)
_TABLE = Deposit._meta.db_table
_LAT_TABLE = Lat._meta.db_table
# One statement for the unfiltered page: the total (the largest dense rank) and the page,
# a range of ranks, both from the unique index on seq.
_PAGE_SQL = f"""
WITH top AS (SELECT MAX(seq) AS n FROM {_TABLE})
SELECT top.n, d.sender, d.receiver, d.asset, l.proxy_address, d.amount, d.shares,
       d.block_number, d.created_at, d.tx_hash, d.log_index, d.chain_id
FROM top
LEFT JOIN {_TABLE} d ON d.seq <= top.n - %s AND d.seq > top.n - %s - %s
LEFT JOIN {_LAT_TABLE} l ON l.id = d.lat_id
ORDER BY d.seq DESC
"""


@dataclass(frozen=True)
class DepositKey:
    """Where a deposit stands in the listing: the listing's order, newest first."""

    block_number: int
    log_index: int
    chain_id: int


@dataclass(frozen=True)
class DepositPage:
    rows: list[dict[str, Any]]
    total: int
    next: DepositKey | None  # the last record's key when more records follow, else None


def iso_instant(value: datetime | str) -> str:
    """DRF's DateTimeField output: ISO 8601 in UTC with a Z."""
    parsed = parse_datetime(value) if isinstance(value, str) else value  # SQLite: a string
    if parsed is None:
        raise ValueError(f"not a date-time: {value!r}")
    text = parsed.astimezone(UTC).isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text


def _record(
    sender, receiver, asset, lat, amount, shares, block, created, tx_hash, log_index, _chain
) -> dict[str, Any]:
    return {
        "sender": sender,
        "receiver": receiver,
        "asset": asset,
        "liquidTokenAddress": lat,
        "amount": str(int(Decimal(amount))),
        "shares": str(int(Decimal(shares))),
        "createdAtBlock": block,
        "createdAt": iso_instant(created),
        "transactionHash": tx_hash,
        "logIndex": log_index,
    }


def deposit_page(
    *, skip: int, take: int, filters: dict[str, str], after: DepositKey | None = None
) -> DepositPage:
    """Deposits newest first (block desc, log index desc, chain id desc) and how many match;
    with `after`, the `take` records that follow that key (keyset paging: what was inserted
    at the head meanwhile does not move the page).

    Unfiltered, the page is a range of the dense `seq` rank and the total is the largest rank:
    one statement, two index lookups, whatever the depth. Filtered, the filter's own index
    serves both the count and the page; the keyset page walks the listing key's index.
    """
    if not filters and after is None:
        with connection.cursor() as cursor:
            cursor.execute(_PAGE_SQL, [skip, skip, take + 1])
            found = cursor.fetchall()
        total = (found[0][0] or 0) if found else 0
        return _page([row[1:] for row in found if row[1] is not None], take, total)
    queryset = Deposit.objects.filter(**_lookups(filters))
    total = queryset.count() if filters else _total()
    if after is not None:
        queryset = queryset.filter(
            Q(block_number__lt=after.block_number)
            | Q(block_number=after.block_number, log_index__lt=after.log_index)
            | Q(
                block_number=after.block_number,
                log_index=after.log_index,
                chain_id__lt=after.chain_id,
            )
        )
        skip = 0
    ordered = queryset.order_by("-block_number", "-log_index", "-chain_id")
    return _page(list(ordered.values_list(*_COLUMNS)[skip : skip + take + 1]), take, total)


def _page(rows: list, take: int, total: int) -> DepositPage:
    """The first `take` of `rows` (read one more, to know whether more follow)."""
    more = len(rows) > take
    rows = rows[:take]
    last = rows[-1] if more else None
    key = DepositKey(block_number=last[6], log_index=last[9], chain_id=last[10]) if last else None
    return DepositPage(rows=[_record(*row) for row in rows], total=total, next=key)


def _total() -> int:
    """Every deposit: the largest dense rank (one index lookup)."""
    return Deposit.objects.aggregate(n=Max("seq"))["n"] or 0


def _lookups(filters: dict[str, str]) -> dict[str, Any]:
    lookups: dict[str, Any] = {FILTERS[name]: value for name, value in filters.items()}
    if "lat_id__in" in lookups:
        # Resolve the LAT first so that the filter uses the (lat, block, log) index alone.
        lookups["lat_id__in"] = list(
            Lat.objects.filter(proxy_address=lookups["lat_id__in"]).values_list("id", flat=True)
        )
    return lookups
