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
from core.addresses import is_beacon_chain_eth
from lats.functions import FEEDS as MISSING_FEEDS
from lats.models import ChainHead, Lat, PriceFeed, SyncStatus
from lats.networks import NEEDED_FOR, READ_FROM_MANAGER

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


def lat_gaps(*, lat: Lat, feeds: set[tuple[int, str]] | None = None) -> list[str]:
    """What the service cannot know of the LAT until staff (or a manifest) tell it, in words
    for ops (admin's sync status, `/health`): a unit of account without a price feed, an
    EigenLayer core contract named nowhere, a function chain.md names that the deployment
    lacks (as the state refresh last found: lats/functions.py), and what the rewards APY could
    not count (as the snapshot job last found: `Lat.apy_gaps`). `feeds` are the (chain id,
    token) pairs that have a price feed; read here when not given."""
    gaps = []
    if not is_beacon_chain_eth(lat.base_asset):
        if feeds is None:
            has_feed = PriceFeed.objects.filter(
                chain_id=lat.chain_id, token_address=lat.base_asset
            ).exists()
        else:
            has_feed = (lat.chain_id, lat.base_asset) in feeds
        if not has_feed:
            gaps.append(
                f"no price feed for the unit of account {lat.base_asset}: its values in ETH are "
                "unknown until staff set one (admin: Price feeds)"
            )
    for name in NEEDED_FOR:
        if lat.core_contract(name):
            continue
        where = f"no preset for chain {lat.chain_id}, no manifest eigenlayer.{name}, no override"
        if name in READ_FROM_MANAGER:
            where += ", and the LiquidTokenManager has not named one (yet: the state job reads it)"
        gaps.append(f"{name} unknown ({where}): {NEEDED_FOR[name]} unknown")
    for name in lat.missing_functions or []:
        unknown = MISSING_FEEDS.get(name, "what it feeds null")
        gaps.append(f"{name} missing on this deployment (an older one): {unknown}")
    return gaps + list(lat.apy_gaps or [])
