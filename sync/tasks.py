"""Every Celery task of the project: take ids, run one refresh step (sync/refresh.py) under the
job runner (sync/jobs.py).

The task names are those of the modules the tasks were first defined in (`lats.tasks...`,
`deposits.tasks...`, `metrics.tasks...`): ops' schedules (django-celery-beat rows) and queued
messages store them, so they never change with the code's layout (core/tasknames.py).
"""

from __future__ import annotations

from typing import Any

from celery import shared_task

from core import tasknames
from sync.jobs import FAN_OUT_OPTIONS, LAT_TASK_OPTIONS, fan_out, run_step
from sync.refresh import DEPOSITS, METADATA, SNAPSHOT, STATE

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
