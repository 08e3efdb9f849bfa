"""The one refresh pipeline: the steps that bring a LAT's stored data in step with its chain.

Per LAT, in this order:
1. **state**: the LAT, its tokens, staker nodes and operators, read at one block (lats, then
   operators) and stored in one transaction;
2. **deposits**: the LAT's events from the checkpoint to the confirmed head: deposits, the
   activity feed and the holders' balances (deposits);
3. **snapshot**: rewards and the metrics of the hour (metrics);
4. **metadata**: the AVS's curated metadata from its latest metadata document (lats),
   independent of the other three.

The Celery tasks run each step under the job runner (sync/jobs.py), beat on a schedule;
`lat_sync` runs them all in-process; admin's "Refresh now" chains the tasks.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db import transaction

from activity.indexer import IndexSummary, deposit_index, deposit_rewind
from activity.indexing import Checkpoint, Rewind
from chain.gateway import Gateway, gateway_for
from core import tasknames
from core.api.documents import documents_changed
from core.locks import advisory_lock
from deposits.models import DepositCheckpoint, Event
from lats.avs_metadata import avs_refresh_metadata
from lats.metadata import MetadataUnavailable
from lats.models import Lat, SyncStatus
from lats.state import RefreshSummary, lat_read_state, lat_state_stored, lat_store_state
from lats.sync_status import sync_status_recording, sync_status_success
from metrics.avs import REWARDS_LOCK, avs_rewind
from metrics.models import RewardsCheckpoint, RewardSubmission
from metrics.services import metrics_refresh
from operators.services import nodes_read, nodes_store
from sync.jobs import Step
from webhooks.outbox import outbox_status_changed


def refresh_state(*, lat: Lat, gateway: Gateway | None = None) -> RefreshSummary:
    """Read the LAT, its tokens, nodes and operators at one block, then store what changed.

    A node on another chain fails the refresh (ChainMismatch), one whose head is below the
    block of the stored state skips it (NodeLagging); either way nothing is written. Any
    failure is recorded on the LAT's sync status."""
    with sync_status_recording(lat=lat, job=SyncStatus.Job.STATE):
        gateway = gateway or gateway_for(lat.chain_id)
        reading = lat_read_state(lat=lat, gateway=gateway)
        nodes = nodes_read(lat=lat, state=reading.state, gateway=gateway)
        with transaction.atomic():
            before = (lat.paused, lat.prices_stale, lat.state_block)
            changed = lat_store_state(lat=lat, reading=reading, gateway=gateway)
            changed += nodes_store(lat=lat, reading=nodes, block=reading.block)
            lat_state_stored(lat=lat, block=reading.block, changed=changed)
            if before[2] is not None and before[:2] != (lat.paused, lat.prices_stale):
                # Pushed with the state that changed (webhooks' outbox): both commit or neither.
                outbox_status_changed(
                    lat=lat,
                    paused=lat.paused,
                    prices_stale=lat.prices_stale,
                    state_block=reading.block.number,
                )
    sync_status_success(lat=lat, job=SyncStatus.Job.STATE, block=reading.block.number)
    return RefreshSummary(lat=lat.proxy_address, block=reading.block.number, changed=changed)


def index_deposits(*, lat: Lat, progress: Callable[[int, int], None] | None = None) -> IndexSummary:
    """Index the LAT's events; when some were added or removed, invalidate the read documents
    and ETags (the indexer writes in bulk, which sends no model signal). A run that failed may
    have stored some ranges before it did: it invalidates too."""
    try:
        summary = deposit_index(lat=lat, progress=progress)
    except BaseException:
        documents_changed()
        raise
    if summary.changed:
        documents_changed()
    return summary


@dataclass(frozen=True)
class LatRefresh:
    state: RefreshSummary
    deposits: IndexSummary
    metadata_error: str | None  # why the AVS metadata was not refreshed, if it was not


def refresh_lat(*, lat: Lat, progress: Callable[[int, int], None] | None = None) -> LatRefresh:
    """Every step once for the LAT, in-process and in order (`lat_sync`). A node error or a
    lagging node stops it; an unusable metadata document does not."""
    state = refresh_state(lat=lat)
    deposits = index_deposits(lat=lat, progress=progress)
    metrics_refresh(lat=lat)
    try:
        avs_refresh_metadata(lat=lat)
    except MetadataUnavailable as exc:
        return LatRefresh(state=state, deposits=deposits, metadata_error=str(exc))
    return LatRefresh(state=state, deposits=deposits, metadata_error=None)


# Each step looks its service up when it runs, so a test can stand in for one.
def _state(lat: Lat) -> dict[str, Any]:
    summary = refresh_state(lat=lat)
    return {"block": summary.block, "changed": summary.changed}


def _deposits(lat: Lat) -> dict[str, Any]:
    summary = index_deposits(lat=lat)
    return {
        "to_block": summary.to_block,
        "new": summary.new,
        "removed": summary.removed,
        "events": summary.events,
        "events_removed": summary.events_removed,
    }


def _snapshot(lat: Lat) -> dict[str, Any]:
    # The rewards APY needs the AVS's latest submissions; metrics are those at its block.
    snapshot = metrics_refresh(lat=lat)
    return {"timestamp": snapshot.timestamp.isoformat(), "block": snapshot.block_number}


def _metadata(lat: Lat) -> dict[str, Any]:
    return {"changed": avs_refresh_metadata(lat=lat)}


STATE = Step(tasknames.REFRESH_LAT_STATE, SyncStatus.Job.STATE, _state)
DEPOSITS = Step(tasknames.INDEX_DEPOSITS, SyncStatus.Job.DEPOSITS, _deposits)
SNAPSHOT = Step(tasknames.RECORD_SNAPSHOT, SyncStatus.Job.SNAPSHOT, _snapshot)
METADATA = Step(tasknames.REFRESH_AVS_METADATA, SyncStatus.Job.METADATA, _metadata)


# --- a rewind by hand ----------------------------------------------------------------------


class RewindRefused(Exception):
    """A rewind that was not done (the message says why); nothing was changed."""


@dataclass(frozen=True)
class RewindSummary:
    lat: str
    kept_through: int  # the last block kept
    deposits: int  # removed
    events: int
    submissions: int  # events of the LAT's AVS (submissions, registrations, splits)


def rewind_lat(*, lat: Lat, keep_through: int, gateway: Gateway | None = None) -> RewindSummary:
    """Remove what a LAT's index stored above block `keep_through` (its deposits and events,
    their transfers taken back out of the balances, its AVS's events, and the days and rates read
    after it) and move both checkpoints back to that block, read from the node: the next run
    indexes from there.

    Ops' way on after ReorgTooDeep, which stops indexing rather than delete more than
    REORG_MAX_DEPTH blocks of history by itself. Refused, with nothing changed, while the LAT's
    deposits job or its AVS's rewards indexing runs, and when the newest stored block at or
    below `keep_through` is not on the node's chain (the fork is below it: rewind further).
    Below the LAT's deployment block, everything is re-indexed from it."""
    gateway = gateway or gateway_for(lat.chain_id)
    with (
        advisory_lock(DEPOSITS.job, lat.id) as deposits_free,
        advisory_lock(REWARDS_LOCK, lat.avs_id) as rewards_free,
    ):
        if not (deposits_free and rewards_free):
            raise RewindRefused(
                "its deposits job or its AVS's rewards indexing is running; try again when it "
                "has finished"
            )
        checkpoint = _checkpoint_at(lat, keep_through, gateway)
        with transaction.atomic():
            deposits = events = submissions = 0
            fork = max(keep_through, lat.deployment_block - 1)
            if DepositCheckpoint.objects.filter(lat=lat, block_number__gt=fork).exists():
                deposits, events = deposit_rewind(lat, Rewind(fork, checkpoint))
            if RewardsCheckpoint.objects.filter(avs_id=lat.avs_id, block_number__gt=fork).exists():
                submissions = avs_rewind(lat, Rewind(fork, checkpoint), gateway)
        documents_changed()
    return RewindSummary(str(lat), fork, deposits, events, submissions)


def _checkpoint_at(lat: Lat, keep_through: int, gateway: Gateway) -> Checkpoint | None:
    """The checkpoint of block `keep_through` as the node has it (None below the deployment
    block), once the newest stored blocks at or below it are found on the node's chain."""
    if keep_through < lat.deployment_block:
        return None
    stored = {
        number: block_hash
        for rows in (
            Event.objects.filter(lat=lat, block_number__lte=keep_through),
            RewardSubmission.objects.filter(avs_id=lat.avs_id, block_number__lte=keep_through),
        )
        for number, block_hash in rows.order_by("-block_number").values_list(
            "block_number", "block_hash"
        )[:1]
    }
    blocks = gateway.blocks({keep_through, *stored}, missing_ok=True)
    if keep_through not in blocks:
        raise RewindRefused(f"the node has no block {keep_through} of chain {lat.chain_id}")
    for number, block_hash in stored.items():
        if block_hash and blocks[number].hash != block_hash:
            raise RewindRefused(
                f"block {number}, stored at or below block {keep_through}, is not on the node's "
                "chain: the fork is further down, rewind to an earlier block"
            )
    return Checkpoint(keep_through, blocks[keep_through].hash)
