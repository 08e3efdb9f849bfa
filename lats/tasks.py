"""Celery tasks of the LAT refresh jobs: thin wrappers that take ids and call one service.

Every per-LAT task of the project (here, in deposits/tasks.py and metrics/tasks.py) runs through
`run_lat_job`: it takes a PostgreSQL advisory lock on (job, lat id) so that overlapping runs of
the same job for the same LAT skip rather than race, and returns a small JSON result whose
`status` is `done`, `skipped` (another run holds the lock), `missing` (no such LAT),
`lagging` (the node is behind what is stored: nothing done, not retried, the next scheduled
run tries again; recorded like a failure, so that a node that stays behind shows in
`consecutive_failures`) or `failed` (a chain revert, a node on another chain, a reorg deeper
than REORG_MAX_DEPTH, an unusable metadata document: not retried). An unreachable node
(`ChainUnavailable`) is retried with exponential backoff and jitter; anything unexpected (a
database error, a malformed manifest, a bug) propagates, so Celery logs it and stores it as the
task's result, and is not retried.

Whatever a job raises is recorded on the LAT's sync status row of that job (the service records
what it raises; `run_lat_job` records whatever reached it unrecorded), so no failure leaves a
job stuck silently.

The fan-out tasks, run by beat, enqueue one per-LAT task per LAT.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from celery import chain, shared_task
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings

from lats.chain.errors import ChainError, ChainUnavailable
from lats.indexing import NodeLagging
from lats.models import Lat, SyncStatus
from lats.services import (
    MetadataUnavailable,
    avs_refresh_metadata,
    lat_refresh_state,
    sync_status_failure,
    sync_status_recorded,
)
from latsite.locks import advisory_lock

logger = logging.getLogger(__name__)

DONE = "done"
SKIPPED = "skipped"
MISSING = "missing"
LAGGING = "lagging"
FAILED = "failed"

# Options of every per-LAT task. Retries back off 10 s, 20 s, 40 s, ... (at most 5 min), each
# drawn at random below that bound (full jitter), so that LATs on one node do not retry in step.
LAT_TASK_OPTIONS: dict[str, Any] = {
    "autoretry_for": (ChainUnavailable,),
    "retry_backoff": 10,
    "retry_backoff_max": 300,
    "retry_jitter": True,
    "max_retries": 5,
    "soft_time_limit": settings.CELERY_TASK_SOFT_TIME_LIMIT,
    "time_limit": settings.CELERY_TASK_TIME_LIMIT,
    "ignore_result": True,
}
# The fan-out tasks only read ids and publish messages.
FAN_OUT_OPTIONS: dict[str, Any] = {
    "soft_time_limit": 60,
    "time_limit": 90,
    "ignore_result": True,
}
# A per-LAT message that waited longer than this is dropped: a later run has superseded it.
FAN_OUT_EXPIRES = 15 * 60


# The sync status row each job records its last result in.
SYNC_STATUS_JOBS = {
    "lats.tasks.refresh_lat_state": SyncStatus.Job.STATE,
    "lats.tasks.refresh_avs_metadata": SyncStatus.Job.METADATA,
    "deposits.tasks.index_deposits": SyncStatus.Job.DEPOSITS,
    "metrics.tasks.record_snapshot": SyncStatus.Job.SNAPSHOT,
}


def run_lat_job(job: str, lat_id: int, run: Callable[[Lat], dict[str, Any]]) -> dict[str, Any]:
    """Run one job for one LAT under its advisory lock; see the module docstring."""
    outcome: dict[str, Any] = {"job": job, "lat": lat_id}
    with advisory_lock(job, lat_id) as acquired:
        if not acquired:
            logger.info("%s for LAT %s is already running; skipped", job, lat_id)
            return outcome | {"status": SKIPPED}
        lat = Lat.objects.select_related("avs").filter(pk=lat_id).first()
        if lat is None:
            logger.warning("%s: no LAT with id %s; nothing to do", job, lat_id)
            return outcome | {"status": MISSING}
        try:
            details = run(lat)
        except SoftTimeLimitExceeded as exc:
            # The service's transaction rolled back; ops see why on the LAT's sync status.
            _record(job, lat, exc, TimeoutError(f"stopped at the soft time limit of {job}"))
            logger.error("%s for %s hit the soft time limit", job, lat.symbol)
            raise
        except Exception as exc:
            _record(job, lat, exc)
            if isinstance(exc, ChainUnavailable):
                raise  # retried by autoretry_for
            error = f"{type(exc).__name__}: {exc}"[:500]
            if isinstance(exc, NodeLagging):
                logger.info("%s for %s skipped: %s", job, lat.symbol, exc)
                return outcome | {"status": LAGGING, "error": error}
            if isinstance(exc, ChainError | MetadataUnavailable):
                logger.warning("%s for %s failed, not retried: %s", job, lat.symbol, exc)
                return outcome | {"status": FAILED, "error": error}
            raise  # unexpected: Celery logs it and stores it as the task's result
    logger.info("%s for %s: %s", job, lat.symbol, details)
    return outcome | {"status": DONE} | details


def _record(job: str, lat: Lat, raised: BaseException, text: BaseException | None = None) -> None:
    """Record what was raised on the job's status row unless the service did; with `text`,
    record that clearer error in its place (counted only if the service did not count it)."""
    status_job = SYNC_STATUS_JOBS.get(job)
    if status_job is None:
        return
    if text is None:
        sync_status_failure(lat=lat, job=status_job, error=raised)  # once per exception
    else:
        recorded = sync_status_recorded(raised)
        sync_status_failure(lat=lat, job=status_job, error=text, count=not recorded)


def fan_out(task, job: str) -> list[int]:
    """Enqueue `task(lat_id)` for every LAT; returns the ids."""
    ids = list(Lat.objects.order_by("id").values_list("id", flat=True))
    for lat_id in ids:
        task.apply_async((lat_id,), expires=FAN_OUT_EXPIRES)
    logger.info("%s: enqueued for %d LAT(s)", job, len(ids))
    return ids


# Task names are spelled out: schedules in the database refer to them.
STATE_JOB = "lats.tasks.refresh_lat_state"
METADATA_JOB = "lats.tasks.refresh_avs_metadata"


@shared_task(name=STATE_JOB, **LAT_TASK_OPTIONS)
def refresh_lat_state(lat_id: int) -> dict[str, Any]:
    """Read the LAT, its tokens, nodes and operators at one block and store what changed."""

    def run(lat: Lat) -> dict[str, Any]:
        summary = lat_refresh_state(lat=lat)
        return {"block": summary.block, "changed": summary.changed}

    return run_lat_job(STATE_JOB, lat_id, run)


@shared_task(name=METADATA_JOB, **LAT_TASK_OPTIONS)
def refresh_avs_metadata(lat_id: int) -> dict[str, Any]:
    """Seed the curated metadata of the LAT's AVS from its latest metadata document."""
    return run_lat_job(METADATA_JOB, lat_id, lambda lat: {"changed": avs_refresh_metadata(lat=lat)})


@shared_task(name="lats.tasks.refresh_all_lat_states", **FAN_OUT_OPTIONS)
def refresh_all_lat_states() -> list[int]:
    return fan_out(refresh_lat_state, STATE_JOB)


@shared_task(name="lats.tasks.refresh_all_avs_metadata", **FAN_OUT_OPTIONS)
def refresh_all_avs_metadata() -> list[int]:
    return fan_out(refresh_avs_metadata, METADATA_JOB)


def enqueue_refresh_now(lat_ids: list[int]) -> None:
    """Admin's "Refresh now": per LAT, state then deposits then a snapshot of both (a chain
    stops at a failure), and the AVS metadata beside them. Call through on_commit."""
    from deposits.tasks import index_deposits
    from metrics.tasks import record_snapshot

    for lat_id in lat_ids:
        chain(
            refresh_lat_state.si(lat_id), index_deposits.si(lat_id), record_snapshot.si(lat_id)
        ).apply_async()
        refresh_avs_metadata.apply_async((lat_id,))


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
        refresh_avs_metadata.apply_async((lat_id,))
