"""Celery tasks of the LAT's own refresh steps: take ids, run one step (latsite/refresh.py)
under the job runner (latsite/jobs.py)."""

from __future__ import annotations

from typing import Any

from celery import shared_task

from latsite.jobs import FAN_OUT_OPTIONS, LAT_TASK_OPTIONS, fan_out, run_step
from latsite.refresh import METADATA, STATE

STATE_JOB = STATE.job
METADATA_JOB = METADATA.job


@shared_task(name=STATE_JOB, **LAT_TASK_OPTIONS)
def refresh_lat_state(lat_id: int) -> dict[str, Any]:
    """Read the LAT, its tokens, nodes and operators at one block and store what changed."""
    return run_step(STATE, lat_id)


@shared_task(name=METADATA_JOB, **LAT_TASK_OPTIONS)
def refresh_avs_metadata(lat_id: int) -> dict[str, Any]:
    """Seed the curated metadata of the LAT's AVS from its latest metadata document."""
    return run_step(METADATA, lat_id)


@shared_task(name="lats.tasks.refresh_all_lat_states", **FAN_OUT_OPTIONS)
def refresh_all_lat_states() -> list[int]:
    return fan_out(refresh_lat_state, STATE_JOB)


@shared_task(name="lats.tasks.refresh_all_avs_metadata", **FAN_OUT_OPTIONS)
def refresh_all_avs_metadata() -> list[int]:
    return fan_out(refresh_avs_metadata, METADATA_JOB)
