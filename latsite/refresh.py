"""The one refresh pipeline: the steps that bring a LAT's stored data in step with its chain.

Per LAT, in this order:
1. **state**: the LAT, its tokens, staker nodes and operators, read at one block (lats, then
   operators) and stored in one transaction;
2. **deposits**: the LAT's events from the checkpoint to the confirmed head: deposits, the
   activity feed and the holders' balances (deposits);
3. **snapshot**: rewards and the metrics of the hour (metrics);
4. **metadata**: the AVS's curated metadata from its latest metadata document (lats),
   independent of the other three.

The Celery tasks run each step under the job runner (latsite/jobs.py), beat on a schedule;
`lat_sync` runs them all in-process; admin's "Refresh now" chains the tasks.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from celery import chain
from django.db import transaction

from deposits.services import IndexSummary, deposit_index
from lats.avs_metadata import avs_refresh_metadata
from lats.chain.gateway import Gateway, gateway_for
from lats.metadata import MetadataUnavailable
from lats.models import Lat, SyncStatus
from lats.state import RefreshSummary, lat_read_state, lat_state_stored, lat_store_state
from lats.sync_status import sync_status_recording, sync_status_success
from latsite.api.documents import documents_changed
from latsite.celery import app
from latsite.jobs import Step
from metrics.services import metrics_refresh
from operators.services import nodes_read, nodes_store


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
            changed = lat_store_state(lat=lat, reading=reading, gateway=gateway)
            changed += nodes_store(lat=lat, reading=nodes, block=reading.block)
            lat_state_stored(lat=lat, block=reading.block, changed=changed)
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


STATE = Step("lats.tasks.refresh_lat_state", SyncStatus.Job.STATE, _state)
DEPOSITS = Step("deposits.tasks.index_deposits", SyncStatus.Job.DEPOSITS, _deposits)
SNAPSHOT = Step("metrics.tasks.record_snapshot", SyncStatus.Job.SNAPSHOT, _snapshot)
METADATA = Step("lats.tasks.refresh_avs_metadata", SyncStatus.Job.METADATA, _metadata)
# The chained steps, each reading what the one before stored; metadata runs beside them.
CHAINED = (STATE, DEPOSITS, SNAPSHOT)


def enqueue_refresh_now(lat_ids: list[int]) -> None:
    """Admin's "Refresh now": per LAT, the chained steps (a chain stops at a failure) and the
    AVS metadata beside them. Call through on_commit."""
    for lat_id in lat_ids:
        chain(*(app.signature(step.job, args=(lat_id,), immutable=True) for step in CHAINED))()
        app.signature(METADATA.job, args=(lat_id,)).apply_async()


def enqueue_metadata_refresh(avs_ids: list[int]) -> None:
    """Refresh the metadata of each AVS through one of its LATs. Call through on_commit."""
    lats = (
        Lat.objects.filter(avs_id__in=avs_ids)
        .exclude(avs_directory="")
        .order_by("avs_id", "id")
        .values_list("avs_id", "id")
    )
    one_per_avs: dict[int, int] = {}
    for avs_id, lat_id in lats:
        one_per_avs.setdefault(avs_id, lat_id)
    for lat_id in one_per_avs.values():
        app.signature(METADATA.job, args=(lat_id,)).apply_async()
