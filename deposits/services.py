"""Writes of deposits: idempotent inserts and reorg removals, with the counts that give the
listing its totals and deep pages (DepositCount, DepositSpan) kept in the same transaction."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime

from django.db import connection, transaction

from deposits.activity import (
    EventRows,
    activity_record,
    activity_remove_from_block,
    event_rows,
    join_event_rows,
    log_times,
)
from deposits.models import (
    Deposit,
    DepositCheckpoint,
    DepositCount,
    DepositSpan,
    DepositSpanTotal,
    Event,
)
from deposits.selectors import lat_contracts
from lats.chain.activity import ActivityLog
from lats.chain.gateway import Gateway, gateway_for, read_ahead_gathered
from lats.indexing import Checkpoint, Range, Rewind, index_ranges, index_start, join_ranges
from lats.models import Lat, SyncStatus
from lats.sync_status import chain_head_seen, sync_status_recording, sync_status_success
from latsite.db import add_counts, bulk_insert, copy_escape

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


# --- indexing from the chain ----------------------------------------------------------------


@dataclass(frozen=True)
class IndexSummary:
    lat: str
    from_block: int
    to_block: int
    new: int  # deposits
    removed: int  # deposits
    events: int = 0  # new events of every type
    events_removed: int = 0

    @property
    def changed(self) -> bool:
        """Whether the run wrote or removed anything the read endpoints serve."""
        return bool(self.new or self.removed or self.events or self.events_removed)


def _stored_blocks(lat: Lat):
    def stored(lowest: int, highest: int) -> list[tuple[int, str]]:
        return list(
            Event.objects.filter(lat=lat, block_number__gte=lowest, block_number__lte=highest)
            .order_by("-block_number")
            .values_list("block_number", "block_hash")
            .distinct()
        )

    return stored


def _checkpoint(lat: Lat) -> Checkpoint | None:
    row = DepositCheckpoint.objects.filter(lat=lat).first()
    if row is None:
        return None
    return Checkpoint(row.block_number, row.block_hash, row.final_block, row.final_hash)


@transaction.atomic
def deposit_rewind(lat: Lat, rewind: Rewind) -> tuple[int, int]:
    """Remove the deposits and events a reorg orphaned (taking their transfers back out of
    the balances) and move the checkpoint back to the fork; returns how many deposits and
    events went."""
    removed = deposit_remove_from_block(lat=lat, block_number=rewind.fork + 1)
    events_removed = activity_remove_from_block(lat=lat, block_number=rewind.fork + 1)
    if rewind.checkpoint is None:
        DepositCheckpoint.objects.filter(lat=lat).delete()
    else:
        DepositCheckpoint.objects.filter(lat=lat).update(
            **rewind.checkpoint.fields(), block_time=None
        )
    return removed, events_removed


def _deposit(log: ActivityLog, times: dict[int, datetime]) -> DepositEvent:
    args = log.args
    return DepositEvent(
        tx_hash=log.tx_hash,
        log_index=log.log_index,
        block_number=log.block_number,
        block_hash=log.block_hash,
        created_at=times[log.block_number],
        kind=log.event,
        sender=args["sender"],
        receiver=args["receiver"],
        asset=args["asset"],
        amount=int(args["amount"]),
        shares=int(args["shares"]),
    )


@dataclass(frozen=True)
class _Ready:
    """A range read, its rows made ready to store without the database (in the read-ahead
    thread, while the range before is stored)."""

    read: Range
    events: EventRows
    deposits: list[DepositEvent]


def _timestamps(read: Range) -> dict[int, int]:
    # Timestamps come with the logs where the node includes them (anvil, geth >= 1.14, reth);
    # otherwise from the blocks read with them.
    return {number: block.timestamp for number, block in read.blocks.items()}


def _ready(lat_id: int, read: Range) -> _Ready:
    timestamps = _timestamps(read)
    deposits = [log for log in read.logs if log.type == Event.Type.DEPOSIT]
    times = log_times(deposits, timestamps)
    return _Ready(
        read=read,
        events=event_rows(lat_id=lat_id, logs=read.logs, timestamps=timestamps),
        deposits=[_deposit(log, times) for log in deposits],
    )


def _join(readies: list[_Ready]) -> _Ready:
    """Consecutive ranges made ready, as one to store in one transaction."""
    if len(readies) == 1:
        return readies[0]
    return _Ready(
        read=join_ranges([r.read for r in readies]),
        events=join_event_rows([r.events for r in readies]),
        deposits=[d for r in readies for d in r.deposits],
    )


@transaction.atomic
def _store_range(lat: Lat, ready: _Ready) -> tuple[int, list[ActivityLog]]:
    """One range's deposits, events and balances with its checkpoint; returns how many
    deposits were new, and the new logs."""
    if connection.vendor == "postgresql":
        # This range and its checkpoint are lost together or kept together: a crash may lose
        # the last commits (re-indexed on the next run), never split them, so the commit need
        # not wait for its WAL flush (a backfill commits once per range).
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL synchronous_commit = off")
    read = ready.read
    new_logs = activity_record(
        lat=lat, logs=read.logs, timestamps=_timestamps(read), rows=ready.events
    )
    new = deposit_record_events(lat=lat, events=ready.deposits)
    DepositCheckpoint.objects.update_or_create(
        lat=lat,
        defaults={
            **read.checkpoint.fields(),
            "block_time": read.blocks[read.last].time,
        },
    )
    return new, new_logs


# A backfill reads up to GATHER_RANGES ranges ahead of the one being stored while they hold
# fewer than GATHER_LOGS logs, and stores those already read in one transaction while they hold
# at most GATHER_LOGS logs.
GATHER_RANGES = 8
GATHER_LOGS = 50_000


def deposit_index(
    *,
    lat: Lat,
    gateway: Gateway | None = None,
    max_range: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> IndexSummary:
    """Index the LAT's events (deposits, the activity feed, holders) from its checkpoint up to
    head - confirmations, in one eth_getLogs per range over its three contracts.

    The node, reorgs and the consistency of logs with their blocks are checked as
    lats/indexing.py describes. Each block range is stored with the checkpoint in one
    transaction, so an interrupted run resumes where it stopped. Any failure is recorded on
    the LAT's sync status.
    """
    with sync_status_recording(lat=lat, job=SyncStatus.Job.DEPOSITS):
        gateway = gateway or gateway_for(lat.chain_id)
        start = index_start(
            lat=lat,
            gateway=gateway,
            checkpoint=_checkpoint(lat),
            origin=lat.deployment_block,
            stored_blocks=_stored_blocks(lat),
        )
        removed, events_removed = deposit_rewind(lat, start.rewind) if start.rewind else (0, 0)
        new, events, head = 0, 0, start.head
        contracts = lat_contracts(lat)

        def fetch(first_block: int, last_block: int) -> list[ActivityLog]:
            return gateway.activity_logs(**contracts, from_block=first_block, to_block=last_block)

        ranges = index_ranges(
            lat=lat,
            gateway=gateway,
            start=start,
            origin=lat.deployment_block,
            fetch=fetch,
            max_range=max_range,
        )
        # The next ranges are read from the node while this one is stored; those read by the
        # time it is are stored together (a backfill moves each holder and count once per
        # transaction, not once per range).
        gathered = read_ahead_gathered(
            (_ready(lat.id, read) for read in ranges),
            depth=GATHER_RANGES,
            weight=lambda ready: len(ready.read.logs),
            limit=GATHER_LOGS,
            ahead=GATHER_LOGS,
        )
        for readies in gathered:
            ready = _join(readies)
            new_deposits, new_logs = _store_range(lat, ready)
            new, events = new + new_deposits, events + len(new_logs)
            if progress:
                progress(ready.read.last - start.first + 1, head.number - start.first + 1)
    chain_head_seen(chain_id=lat.chain_id, head=head)
    sync_status_success(lat=lat, job=SyncStatus.Job.DEPOSITS, block=head.number)
    return IndexSummary(
        lat=lat.proxy_address,
        from_block=start.first,
        to_block=head.number,
        new=new,
        removed=removed,
        events=events,
        events_removed=events_removed,
    )
