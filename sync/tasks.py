"""Every Celery task of the project: take ids, run one refresh step (sync/refresh.py) under the
job runner (sync/jobs.py).

The task names are those of the modules the tasks were first defined in (`lats.tasks...`,
`deposits.tasks...`, `metrics.tasks...`): ops' schedules (django-celery-beat rows) and queued
messages store them, so they never change with the code's layout (core/tasknames.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from celery import shared_task
from django.conf import settings

from core import tasknames
from core.locks import advisory_lock
from sync.jobs import FAN_OUT_OPTIONS, LAT_TASK_OPTIONS, fan_out, run_step
from sync.refresh import DEPOSITS, METADATA, SNAPSHOT, STATE
from webhooks.retention import Pruned, deliveries_prune, outbox_prune

logger = logging.getLogger(__name__)

STATE_JOB = STATE.job
METADATA_JOB = METADATA.job
DEPOSITS_JOB = DEPOSITS.job
SNAPSHOT_JOB = SNAPSHOT.job


@shared_task(name=STATE_JOB, **LAT_TASK_OPTIONS)
def refresh_lat_state(lat_id: int) -> dict[str, Any]:
    """Read the LAT, its tokens, nodes and operators at one block and store what changed."""
    return run_step(STATE, lat_id)


@shared_task(name=METADATA_JOB, **LAT_TASK_OPTIONS)
def refresh_avs_metadata(lat_id: int) -> dict[str, Any]:
    """Seed the curated metadata of the LAT's AVS from its latest metadata document."""
    return run_step(METADATA, lat_id)


@shared_task(name=DEPOSITS_JOB, **LAT_TASK_OPTIONS)
def index_deposits(lat_id: int) -> dict[str, Any]:
    """Index the LAT's events from its checkpoint to the confirmed head.

    Each block range is committed with the checkpoint, so a run stopped by the time limit
    resumes where it stopped on the next run."""
    return run_step(DEPOSITS, lat_id)


@shared_task(name=SNAPSHOT_JOB, **LAT_TASK_OPTIONS)
def record_snapshot(lat_id: int) -> dict[str, Any]:
    """Record the LAT's metrics for the current hour (the latest run of the hour wins)."""
    return run_step(SNAPSHOT, lat_id)


@shared_task(name=tasknames.REFRESH_ALL_LAT_STATES, **FAN_OUT_OPTIONS)
def refresh_all_lat_states() -> list[int]:
    return fan_out(refresh_lat_state, STATE_JOB)


@shared_task(name=tasknames.REFRESH_ALL_AVS_METADATA, **FAN_OUT_OPTIONS)
def refresh_all_avs_metadata() -> list[int]:
    return fan_out(refresh_avs_metadata, METADATA_JOB)


@shared_task(name=tasknames.INDEX_ALL_DEPOSITS, **FAN_OUT_OPTIONS)
def index_all_deposits() -> list[int]:
    return fan_out(index_deposits, DEPOSITS_JOB)


@shared_task(name=tasknames.RECORD_ALL_SNAPSHOTS, **FAN_OUT_OPTIONS)
def record_all_snapshots() -> list[int]:
    return fan_out(record_snapshot, SNAPSHOT_JOB)


# The retention jobs: each batch commits on its own, so a run stopped anywhere resumes where it
# stopped; a run starts no batch after 80% of the soft time limit and the next run goes on.
RETENTION_OPTIONS: dict[str, Any] = {
    "soft_time_limit": settings.CELERY_TASK_SOFT_TIME_LIMIT,
    "time_limit": settings.CELERY_TASK_TIME_LIMIT,
    "ignore_result": True,
}


def _pruned(name: str, prune: Callable[..., Pruned]) -> dict[str, Any]:
    """`prune` under the job's advisory lock (an overlapping run skips)."""
    with advisory_lock(name) as acquired:
        if not acquired:
            logger.info("%s is already running; skipped", name)
            return {"status": "skipped", "deleted": 0}
        pruned = prune(seconds=0.8 * settings.CELERY_TASK_SOFT_TIME_LIMIT)
    out = {"status": "done", "deleted": pruned.rows}
    out |= {"attempts": pruned.attempts, "history": pruned.history}
    logger.info("%s: %s", name, out)
    return out


@shared_task(name=tasknames.PRUNE_PUSH_OUTBOX, **RETENTION_OPTIONS)
def prune_push_outbox() -> dict[str, Any]:
    """Delete the push feed's events older than PUSH_RETENTION_DAYS (stream cursors before
    them are answered with a reset)."""
    return _pruned(tasknames.PRUNE_PUSH_OUTBOX, outbox_prune)


@shared_task(name=tasknames.PRUNE_PUSH_DELIVERIES, **RETENTION_OPTIONS)
def prune_push_deliveries() -> dict[str, Any]:
    """Delete webhook deliveries, with their attempts and history, older than
    DELIVERY_RETENTION_DAYS."""
    return _pruned(tasknames.PRUNE_PUSH_DELIVERIES, deliveries_prune)
