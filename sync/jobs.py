"""The job runner: how every per-LAT Celery task of the project runs one refresh step.

`run_step` takes a PostgreSQL advisory lock on (job, lat id), so that overlapping runs of the
same job for the same LAT skip rather than race, and returns a small JSON result whose
`status` is `done`, `skipped` (another run holds the lock), `missing` (no such LAT),
`lagging` (the node is behind what is stored: nothing done, not retried, the next scheduled
run tries again; recorded like a failure, so that a node that stays behind shows in
`consecutive_failures`) or `failed` (a chain revert, a node on another chain, a reorg deeper
than REORG_MAX_DEPTH, an unusable metadata document: not retried). An unreachable node
(`ChainUnavailable`) is retried with exponential backoff and jitter; anything unexpected (a
database error, a malformed manifest, a bug) propagates, so Celery logs it and stores it as the
task's result, and is not retried.

Whatever a step raises is recorded on the LAT's sync status row of its job (the services
record what they raise; the runner records whatever reached it unrecorded), so no failure
leaves a job stuck silently.

Every run is counted and timed by task name and status (core/telemetry.py), a run that
raised under the status `unavailable` (retried), `timeout` (soft time limit) or `error`.

The fan-out tasks, run by beat, enqueue one per-LAT task per LAT.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings

from chain.errors import ChainError, ChainUnavailable
from core import telemetry
from core.locks import advisory_lock
from lats.checks import NodeLagging
from lats.metadata import MetadataUnavailable
from lats.models import Lat
from lats.sync_status import sync_status_failure, sync_status_recorded

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


@dataclass(frozen=True)
class Step:
    """One step of the refresh pipeline: its task name (spelled out: schedules in the database
    refer to it; also the name of its lock), the sync status row it records on, and what it
    does for one LAT (returning the details of the task's result)."""

    job: str
    status: str
    run: Callable[[Lat], dict[str, Any]]


def run_step(step: Step, lat_id: int) -> dict[str, Any]:
    """Run one step for one LAT under its advisory lock; see the module docstring."""
    started = time.perf_counter()
    status = "error"
    try:
        result = _run_locked(step, lat_id)
        status = result["status"]
        return result
    except BaseException as exc:
        status = _raised_status(exc)
        raise
    finally:
        telemetry.job_finished(step.job, status, time.perf_counter() - started)


def _raised_status(exc: BaseException) -> str:
    if isinstance(exc, ChainUnavailable):
        return "unavailable"
    if isinstance(exc, SoftTimeLimitExceeded):
        return "timeout"
    return "error"


def _run_locked(step: Step, lat_id: int) -> dict[str, Any]:
    outcome: dict[str, Any] = {"job": step.job, "lat": lat_id}
    with advisory_lock(step.job, lat_id) as acquired:
        if not acquired:
            logger.info("%s for LAT %s is already running; skipped", step.job, lat_id)
            return outcome | {"status": SKIPPED}
        lat = Lat.objects.select_related("avs").filter(pk=lat_id).first()
        if lat is None:
            logger.warning("%s: no LAT with id %s; nothing to do", step.job, lat_id)
            return outcome | {"status": MISSING}
        try:
            details = step.run(lat)
        except SoftTimeLimitExceeded as exc:
            # The service's transaction rolled back; ops see why on the LAT's sync status.
            stopped = TimeoutError(f"stopped at the soft time limit of {step.job}")
            recorded = sync_status_recorded(exc)
            sync_status_failure(lat=lat, job=step.status, error=stopped, count=not recorded)
            logger.error("%s for %s hit the soft time limit", step.job, lat.symbol)
            raise
        except Exception as exc:
            sync_status_failure(lat=lat, job=step.status, error=exc)  # once per exception
            return outcome | _failure(step, lat, exc)
    logger.info("%s for %s: %s", step.job, lat.symbol, details)
    return outcome | {"status": DONE} | details


def _failure(step: Step, lat: Lat, exc: Exception) -> dict[str, Any]:
    """The result of a run that raised `exc`, or `exc` again where Celery must see it."""
    if isinstance(exc, ChainUnavailable):
        raise exc  # retried by autoretry_for
    error = f"{type(exc).__name__}: {exc}"[:500]
    if isinstance(exc, NodeLagging):
        logger.info("%s for %s skipped: %s", step.job, lat.symbol, exc)
        return {"status": LAGGING, "error": error}
    if isinstance(exc, ChainError | MetadataUnavailable):
        logger.warning("%s for %s failed, not retried: %s", step.job, lat.symbol, exc)
        return {"status": FAILED, "error": error}
    raise exc  # unexpected: Celery logs it and stores it as the task's result


def fan_out(task, job: str) -> list[int]:
    """Enqueue `task(lat_id)` for every LAT; returns the ids."""
    ids = list(Lat.objects.order_by("id").values_list("id", flat=True))
    for lat_id in ids:
        task.apply_async((lat_id,), expires=FAN_OUT_EXPIRES)
    logger.info("%s: enqueued for %d LAT(s)", job, len(ids))
    return ids
