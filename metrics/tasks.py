"""Celery tasks of metric snapshots: take ids, call `metrics_refresh` (see lats/tasks.py)."""

from __future__ import annotations

from typing import Any

from celery import shared_task

from lats.models import Lat
from lats.tasks import FAN_OUT_OPTIONS, LAT_TASK_OPTIONS, fan_out, run_lat_job
from metrics.services import metrics_refresh

SNAPSHOT_JOB = "metrics.tasks.record_snapshot"


@shared_task(name=SNAPSHOT_JOB, **LAT_TASK_OPTIONS)
def record_snapshot(lat_id: int) -> dict[str, Any]:
    """Record the LAT's metrics for the current hour (the latest run of the hour wins)."""

    def run(lat: Lat) -> dict[str, Any]:
        # The rewards APY needs the AVS's latest submissions; metrics are those at its block.
        snapshot = metrics_refresh(lat=lat)
        return {"timestamp": snapshot.timestamp.isoformat(), "block": snapshot.block_number}

    return run_lat_job(SNAPSHOT_JOB, lat_id, run)


@shared_task(name="metrics.tasks.record_all_snapshots", **FAN_OUT_OPTIONS)
def record_all_snapshots() -> list[int]:
    return fan_out(record_snapshot, SNAPSHOT_JOB)
