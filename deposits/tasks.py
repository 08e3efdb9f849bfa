"""Celery tasks of deposit indexing: take ids, call `deposit_index` (see lats/tasks.py)."""

from __future__ import annotations

from typing import Any

from celery import shared_task

from deposits.services import deposit_index
from lats.models import Lat
from lats.tasks import FAN_OUT_OPTIONS, LAT_TASK_OPTIONS, fan_out, run_lat_job

DEPOSITS_JOB = "deposits.tasks.index_deposits"


@shared_task(name=DEPOSITS_JOB, **LAT_TASK_OPTIONS)
def index_deposits(lat_id: int) -> dict[str, Any]:
    """Index the LAT's deposit events from its checkpoint to the confirmed head.

    Each block range is committed with the checkpoint, so a run stopped by the time limit
    resumes where it stopped on the next run.
    """

    def run(lat: Lat) -> dict[str, Any]:
        summary = deposit_index(lat=lat)
        return {"to_block": summary.to_block, "new": summary.new, "removed": summary.removed}

    return run_lat_job(DEPOSITS_JOB, lat_id, run)


@shared_task(name="deposits.tasks.index_all_deposits", **FAN_OUT_OPTIONS)
def index_all_deposits() -> list[int]:
    return fan_out(index_deposits, DEPOSITS_JOB)
