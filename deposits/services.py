"""Writes of deposits: idempotent inserts and reorg removals, with the counts that give the
listing its totals and deep pages (DepositCount, DepositSpan) kept in the same transaction."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from django.db import connection, transaction

from core.db import add_counts, bulk_insert, copy_escape
from deposits.models import (
    Deposit,
    DepositCount,
    DepositSpan,
    DepositSpanTotal,
)
from lats.models import Lat

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class DepositEvent:
    tx_hash: str
    log_index: int
    block_number: int
    block_hash: str
    created_at: datetime
    kind: str
    sender: str
    receiver: str
    asset: str
    amount: int
    shares: int

    @property
    def key(self) -> tuple[int, int]:
        return (self.block_number, self.log_index)


_TABLE = Deposit._meta.db_table
_COPY_COLUMNS = (
    "lat_id",
    "chain_id",
    "tx_hash",
    "log_index",
    "block_number",
    "block_hash",
    "created_at",
    "kind",
    "sender",
    "receiver",
    "asset",
    "amount",
    "shares",
)


def _insert(*, lat: Lat, events: list[DepositEvent]) -> None:
    """Insert new deposits at once (COPY on PostgreSQL)."""
    rows = (
        (
            lat.id,
            lat.chain_id,
            e.tx_hash,
            e.log_index,
            e.block_number,
            e.block_hash,
            e.created_at,
            e.kind,
            e.sender,
            e.receiver,
            e.asset,
            e.amount,
            e.shares,
        )
        for e in events
    )
    bulk_insert(Deposit, _COPY_COLUMNS, rows, copy_line=_deposit_line)


def _deposit_line(row: tuple) -> str:
    """A Deposit row in COPY's text format: numbers and the node's hex strings (escaped)."""
    lat_id, chain, tx_hash, index, block, block_hash, created, kind, s, r, a, amount, shares = row
    return (
        f"{lat_id}\t{chain}\t{copy_escape(tx_hash)}\t{index}\t{block}\t{copy_escape(block_hash)}"
        f"\t{created.isoformat()}\t{kind}\t{s}\t{r}\t{a}\t{int(amount)}\t{int(shares)}\n"
    )


def _count(lat: Lat, deposits: Iterable[tuple[str, str, str, int]], sign: int) -> None:
    """Add (sign 1) or take away (-1) deposits given as (sender, receiver, asset, block number)
    to the LAT's counts per filter and per span."""
    counts: Counter[tuple[int, str, str]] = Counter()
    spans: Counter[tuple[int, int]] = Counter()
    for sender, receiver, asset, block_number in deposits:
        counts[lat.id, DepositCount.Field.ALL, ""] += sign
        counts[lat.id, DepositCount.Field.SENDER, sender] += sign
        counts[lat.id, DepositCount.Field.RECEIVER, receiver] += sign
        counts[lat.id, DepositCount.Field.ASSET, asset] += sign
        spans[lat.id, block_number // DepositSpan.SPAN_BLOCKS] += sign
    add_counts(DepositCount, ("lat_id", "field", "address"), counts)
    add_counts(DepositSpan, ("lat_id", "span"), spans)
    totals: Counter[tuple[int]] = Counter()
    for (_, span), n in spans.items():
        totals[(span,)] += n
    add_counts(DepositSpanTotal, ("span",), totals)


@transaction.atomic
def deposit_record_events(*, lat: Lat, events: Iterable[DepositEvent]) -> int:
    """Insert the events not yet stored; returns how many were new. Running twice adds nothing."""
    events = sorted(events, key=lambda e: e.key)
    if not events:
        return 0
    existing = set(
        Deposit.objects.filter(
            lat=lat,
            block_number__gte=events[0].block_number,
            block_number__lte=events[-1].block_number,
        ).values_list("tx_hash", "log_index")
    )
    new = [e for e in events if (e.tx_hash, e.log_index) not in existing]
    if not new:
        return 0
    _insert(lat=lat, events=new)
    _count(lat, ((e.sender, e.receiver, e.asset, e.block_number) for e in new), 1)
    return len(new)


@transaction.atomic
def deposit_remove_from_block(*, lat: Lat, block_number: int) -> int:
    """Remove the LAT's deposits at or after a block (orphaned by a reorg); returns how many."""
    doomed = Deposit.objects.filter(lat=lat, block_number__gte=block_number)
    _count(lat, doomed.values_list("sender", "receiver", "asset", "block_number"), -1)
    removed, _ = doomed.delete()
    return removed


_RECOUNT = (
    f"""
    INSERT INTO {DepositCount._meta.db_table} (lat_id, field, address, n)
    SELECT lat_id, '', '', COUNT(*) FROM {_TABLE} {{where}} GROUP BY lat_id
    UNION ALL SELECT lat_id, 'sender', sender, COUNT(*) FROM {_TABLE} {{where}}
    GROUP BY lat_id, sender
    UNION ALL SELECT lat_id, 'receiver', receiver, COUNT(*) FROM {_TABLE} {{where}}
    GROUP BY lat_id, receiver
    UNION ALL SELECT lat_id, 'asset', asset, COUNT(*) FROM {_TABLE} {{where}}
    GROUP BY lat_id, asset
    """,
    f"""
    INSERT INTO {DepositSpan._meta.db_table} (lat_id, span, n)
    SELECT lat_id, block_number / %(span)s, COUNT(*) FROM {_TABLE} {{where}}
    GROUP BY lat_id, block_number / %(span)s
    """,
)


@transaction.atomic
def deposit_recount(*, lats: Iterable[Lat] | None = None) -> int:
    """Count the stored deposits again into DepositCount and DepositSpan, for the LATs given
    or every LAT, and DepositSpanTotal from all the LATs' spans (after a bulk load, or a
    repair by hand); returns how many deposits."""
    ids = None if lats is None else [int(lat.id) for lat in lats]
    scope = {} if ids is None else {"lat_id__in": ids}
    for model in (DepositCount, DepositSpan):
        model.objects.filter(**scope).delete()
    # The ids are the rows' own integers: written into the statement, in either SQL dialect.
    where = "" if ids is None else f"WHERE lat_id IN ({', '.join(map(str, ids or [0]))})"
    with connection.cursor() as cursor:
        for statement in _RECOUNT:
            cursor.execute(statement.format(where=where), {"span": DepositSpan.SPAN_BLOCKS})
        # The totals over every LAT, from the LATs' spans just counted.
        DepositSpanTotal.objects.all().delete()
        cursor.execute(
            f"INSERT INTO {DepositSpanTotal._meta.db_table} (span, n) "
            f"SELECT span, SUM(n) FROM {DepositSpan._meta.db_table} GROUP BY span"
        )
    counted = DepositCount.objects.filter(field=DepositCount.Field.ALL, **scope)
    return sum(counted.values_list("n", flat=True))
