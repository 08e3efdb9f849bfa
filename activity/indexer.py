"""The event indexer: a LAT's events read from its chain range by range and stored with the
range's checkpoint in one transaction: the activity feed and the holders' balances
(activity/store.py), the deposit records as their projection (deposits/services.py).

Checkpoints, reorgs and the consistency of logs with their blocks: activity/indexing.py.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from django.db import connection, transaction

from activity.indexing import (
    Checkpoint,
    Range,
    Rewind,
    Start,
    index_ranges,
    index_start,
    join_ranges,
)
from activity.store import (
    EventRows,
    activity_record,
    activity_remove_from_block,
    event_rows,
    join_event_rows,
    log_times,
)
from chain.activity import ActivityLog
from chain.gateway import Gateway, gateway_for, read_ahead_gathered
from deposits.models import DepositCheckpoint, Event
from deposits.selectors import lat_contracts
from deposits.services import DepositEvent, deposit_record_events, deposit_remove_from_block
from lats.models import Lat, SyncStatus
from lats.sync_status import chain_head_seen, sync_status_recording, sync_status_success
from operators.models import StakerNode

logger = logging.getLogger(__name__)


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


class IndexListener(Protocol):
    """What else an indexing transaction writes (the webhooks' outbox, webhooks/outbox.py): it
    is called inside the transaction that stores or removes the events, so that both commit or
    neither does. Registered by its app (the floors keep this package from importing it)."""

    def stored(self, lat: Lat, logs: Sequence[ActivityLog]) -> None:
        """`logs` were stored (new ones only). Not called for the history a LAT's first
        indexing stores (until a run of it has succeeded): what a LAT just imported did before
        is news to no one (it is in the feed), and pushing it would flood every subscriber."""

    def removing(self, lat: Lat, from_block: int) -> None:
        """The LAT's events at or after `from_block` are about to be removed (a reorg)."""


_LISTENERS: list[IndexListener] = []


def listen(listener: IndexListener) -> None:
    if listener not in _LISTENERS:
        _LISTENERS.append(listener)


def lat_log_sources(lat: Lat, gateway: Gateway, *, block: int) -> dict[str, Any]:
    """What `Gateway.activity_logs` reads for the LAT: its proxies, the node beacon (read from
    the coordinator at `block` until known) and its stored staker nodes {address: id}."""
    contracts = lat_contracts(lat)
    return {
        **contracts,
        "beacon": gateway.node_beacon(contracts["coordinator"], block=block),
        "nodes": dict(StakerNode.objects.filter(lat=lat).values_list("address", "node_id")),
    }


def lat_log_addresses(lat: Lat, gateway: Gateway, *, block: int) -> list[str]:
    """Every address of the LAT whose events the indexer reads (one eth_getLogs over them)."""
    sources = lat_log_sources(lat, gateway, block=block)
    fixed = ("proxy", "manager", "coordinator", "oracle", "beacon")
    return [a for a in (sources[k] for k in fixed) if a] + list(sources["nodes"])


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
    for listener in _LISTENERS:
        listener.removing(lat, rewind.fork + 1)
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
def _store_range(lat: Lat, ready: _Ready, *, news: bool) -> tuple[int, list[ActivityLog]]:
    """One range's deposits, events and balances with its checkpoint; returns how many
    deposits were new, and the new logs."""
    if connection.vendor == "postgresql":
        # This range and its checkpoint are lost together or kept together: a crash may lose
        # the last commits (re-indexed on the next run), never split them, so the commit need
        # not wait for its WAL flush (a backfill commits once per range). A range that writes
        # the webhooks' outbox (a listener) is pushed at its commit: the outbox turns this
        # back on for it (webhooks/outbox.py), as nothing is sent before it is durable.
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL synchronous_commit = off")
    read = ready.read
    new_logs = activity_record(
        lat=lat, logs=read.logs, timestamps=_timestamps(read), rows=ready.events
    )
    new = deposit_record_events(lat=lat, events=ready.deposits)
    for listener in _LISTENERS if news else ():
        listener.stored(lat, new_logs)
    DepositCheckpoint.objects.update_or_create(
        lat=lat,
        defaults={
            **read.checkpoint.fields(),
            "block_time": read.blocks[read.last].time,
        },
    )
    return new, new_logs


def _store_ranges(
    lat: Lat,
    ranges: Iterable[Range],
    start: Start,
    progress: Callable[[int, int], None] | None,
) -> tuple[int, int]:
    """Store the ranges read; returns how many deposits and events were new.

    The next ranges are read from the node while one is stored; those read by the time it is
    are stored together (a backfill moves each holder and count once per transaction, not once
    per range)."""
    news = SyncStatus.objects.filter(
        lat=lat, job=SyncStatus.Job.DEPOSITS, last_success_at__isnull=False
    ).exists()
    gathered = read_ahead_gathered(
        (_ready(lat.id, read) for read in ranges),
        depth=GATHER_RANGES,
        weight=lambda ready: len(ready.read.logs),
        limit=GATHER_LOGS,
        ahead=GATHER_LOGS,
    )
    new = events = 0
    for readies in gathered:
        ready = _join(readies)
        new_deposits, new_logs = _store_range(lat, ready, news=news)
        new, events = new + new_deposits, events + len(new_logs)
        if progress:
            progress(ready.read.last - start.first + 1, start.head.number - start.first + 1)
    return new, events


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
    head - confirmations, in one eth_getLogs per range over its contracts (proxies, node
    beacon, staker nodes).

    The node, reorgs and the consistency of logs with their blocks are checked as
    activity/indexing.py describes. Each block range is stored with the checkpoint in one
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
        head = start.head
        # The nodes gain those each range creates (activity_logs), for the ranges after it.
        sources = lat_log_sources(lat, gateway, block=head.number)

        def fetch(first_block: int, last_block: int) -> list[ActivityLog]:
            return gateway.activity_logs(**sources, from_block=first_block, to_block=last_block)

        ranges = index_ranges(
            lat=lat,
            gateway=gateway,
            start=start,
            origin=lat.deployment_block,
            fetch=fetch,
            max_range=max_range,
        )
        new, events = _store_ranges(lat, ranges, start, progress)
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
