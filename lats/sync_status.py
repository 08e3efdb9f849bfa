"""The sync status of each (LAT, job): the last success, the last error and the failures since.

Every refresh records what it raises (`sync_status_recording`), and the job runner records
whatever reached it unrecorded, so that no failure leaves a job stuck silently.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

from django.db import DatabaseError, transaction
from django.utils import timezone

from chain.results import Block
from lats.models import ChainHead, Lat, SyncStatus

logger = logging.getLogger(__name__)


def chain_head_seen(*, chain_id: int, head: Block) -> None:
    """Record the confirmed head an indexing run of the chain read up to, when it is not the
    one recorded (after a reorg it may be lower than the one before: the chain's current head
    is what a status compares). `seen_at` is when it was first seen."""
    current = ChainHead.objects.filter(chain_id=chain_id).values_list("block_number", "block_hash")
    if current.first() == (head.number, head.hash):
        return
    ChainHead.objects.update_or_create(
        chain_id=chain_id,
        defaults={
            "block_number": head.number,
            "block_hash": head.hash,
            "block_time": head.time,
            "seen_at": timezone.now(),
        },
    )


def sync_status_success(*, lat: Lat, job: str, block: int | None) -> None:
    SyncStatus.objects.update_or_create(
        lat=lat,
        job=job,
        defaults={
            "last_success_at": timezone.now(),
            "last_block": block,
            "last_error": "",
            "consecutive_failures": 0,
        },
    )


# Set on an exception once it is recorded, so that the job runner, which records whatever a
# service did not, does not count it twice.
_RECORDED = "_lat_sync_status_recorded"


def sync_status_recorded(error: BaseException) -> bool:
    return bool(getattr(error, _RECORDED, False))


def sync_status_failure(*, lat: Lat, job: str, error: BaseException, count: bool = True) -> None:
    """Record the error on the LAT's status row of `job` (once per exception); with
    count=False only the text is replaced (a clearer reason for a failure already counted).

    A database that cannot record it (down, or the error was its own) is logged, never
    raised: the original error is what the caller must see."""
    if count and sync_status_recorded(error):
        return
    try:
        with transaction.atomic():
            status, _ = SyncStatus.objects.select_for_update().get_or_create(lat=lat, job=job)
            status.last_error = f"{type(error).__name__}: {error}"[:2000]
            status.last_error_at = timezone.now()
            status.consecutive_failures += 1 if count else 0
            status.save(update_fields=["last_error", "last_error_at", "consecutive_failures"])
    except DatabaseError:
        logger.exception("The failure of %s for LAT %s could not be recorded", job, lat.pk)
        return
    with contextlib.suppress(AttributeError):
        setattr(error, _RECORDED, True)


@contextlib.contextmanager
def sync_status_recording(*, lat: Lat, job: str) -> Iterator[None]:
    """Record any exception raised in the block on the LAT's status row of `job`, then
    re-raise it: no failure of a refresh goes unrecorded."""
    try:
        yield
    except Exception as exc:
        logger.warning("%s of %s failed: %s: %s", job, lat.proxy_address, type(exc).__name__, exc)
        sync_status_failure(lat=lat, job=job, error=exc)
        raise
