"""Celery tasks of deposit indexing: take ids, run the deposits step (latsite/refresh.py)
under the job runner (latsite/jobs.py).

Each block range is committed with the checkpoint, so a run stopped by the time limit resumes
where it stopped on the next run.
"""

from __future__ import annotations

from typing import Any

from celery import shared_task

from latsite.jobs import FAN_OUT_OPTIONS, LAT_TASK_OPTIONS, fan_out, run_step
from latsite.refresh import DEPOSITS

DEPOSITS_JOB = DEPOSITS.job


@shared_task(name=DEPOSITS_JOB, **LAT_TASK_OPTIONS)
def index_deposits(lat_id: int) -> dict[str, Any]:
    """Index the LAT's deposit events from its checkpoint to the confirmed head."""
    return run_step(DEPOSITS, lat_id)


@shared_task(name="deposits.tasks.index_all_deposits", **FAN_OUT_OPTIONS)
def index_all_deposits() -> list[int]:
    return fan_out(index_deposits, DEPOSITS_JOB)
