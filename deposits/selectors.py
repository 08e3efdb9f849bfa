"""Reads of deposits: the newest-first listing, with paging that stays fast at any depth."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Max

from deposits.models import Deposit
from lats.models import Lat

FILTERS = {
    "liquidTokenAddress": "lat__proxy_address__in",
    "sender": "sender",
    "receiver": "receiver",
    "asset": "asset",
}


@dataclass(frozen=True)
class DepositPage:
    rows: list[Deposit]
    total: int


def deposit_page(*, skip: int, take: int, filters: dict[str, str]) -> DepositPage:
    """Deposits newest first (block desc, log index desc).

    Unfiltered, the page is a range of the dense `seq` rank and the total is the largest
    rank: two index lookups whatever the depth. Filtered, the filter's own index serves both
    the count and the page.
    """
    columns = ("lat__proxy_address",)
    if not filters:
        total = Deposit.objects.aggregate(top=Max("seq"))["top"] or 0
        high = total - skip
        rows = (
            list(
                Deposit.objects.filter(seq__lte=high, seq__gt=high - take)
                .select_related("lat")
                .only("lat__proxy_address", *_FIELDS)
                .order_by("-seq")
            )
            if high > 0
            else []
        )
        return DepositPage(rows=rows, total=total)
    lookups = {FILTERS[name]: value for name, value in filters.items()}
    if "lat__proxy_address__in" in lookups:
        # Resolve the LAT first so that the filter uses the (lat, block, log) index alone.
        lookups["lat_id__in"] = list(
            Lat.objects.filter(proxy_address=lookups.pop("lat__proxy_address__in")).values_list(
                "id", flat=True
            )
        )
    queryset = Deposit.objects.filter(**lookups)
    total = queryset.count()
    rows = list(
        queryset.select_related("lat")
        .only(*columns, *_FIELDS)
        .order_by("-block_number", "-log_index", "-chain_id")[skip : skip + take]
    )
    return DepositPage(rows=rows, total=total)


_FIELDS = ("sender", "receiver", "asset", "amount", "shares", "block_number", "created_at", "lat")
