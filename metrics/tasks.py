"""Celery tasks of metric snapshots: take ids, run the snapshot step (latsite/refresh.py)
under the job runner (latsite/jobs.py)."""

from __future__ import annotations

from typing import Any

from celery import shared_task

from latsite.jobs import FAN_OUT_OPTIONS, LAT_TASK_OPTIONS, fan_out, run_step
from latsite.refresh import SNAPSHOT

SNAPSHOT_JOB = SNAPSHOT.job


@shared_task(name=SNAPSHOT_JOB, **LAT_TASK_OPTIONS)
def record_snapshot(lat_id: int) -> dict[str, Any]:
    """Record the LAT's metrics for the current hour (the latest run of the hour wins)."""
    return run_step(SNAPSHOT, lat_id)


@shared_task(name="metrics.tasks.record_all_snapshots", **FAN_OUT_OPTIONS)
def record_all_snapshots() -> list[int]:
    return fan_out(record_snapshot, SNAPSHOT_JOB)
