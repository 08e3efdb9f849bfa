"""The events of a LAT's AVS that its rewards APY reads (decisions.md, "Rewards APY"): the
counted rewards submissions (`RewardSubmission`) and the rest (`AvsEvent`: operators'
registrations and splits, the coordinator's default split, the kinds of submission not
counted), from the RewardsCoordinator and the AVSDirectory (chain/eigenlayer.py).

They are read from the first block where either contract has code (an operator registered or a
split set long before the LAT existed still counts), with the checkpoints and reorg handling of
the deposits (activity/indexing.py). Several LATs may share the AVS: one job at a time indexes
it (an advisory lock per AVS), and the days of the AVS are read under the same lock
(metrics/days.py). A reorg under the checkpoint removes what the orphaned blocks stored and
moves back every day and rate point read after the fork, of the AVS and of its LATs: the next
run reads them again."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date

from django.db import transaction
from django.db.models import Q

from activity.indexing import Checkpoint, Range, Rewind, index_ranges, index_start
from chain import eigenlayer
from chain.errors import ChainError
from chain.gateway import Gateway
from chain.history import first_block_with_code
from chain.results import Block
from core.locks import advisory_lock
from lats.models import Lat
from metrics.models import (
    AvsDay,
    AvsEvent,
    LatDay,
    RatePoint,
    RewardsCheckpoint,
    RewardSubmission,
)
from metrics.timeline import utc_day

logger = logging.getLogger(__name__)

REWARDS_LOCK = "metrics.rewards_index"
# The events of the AVS are few (submissions, registrations, splits): wide ranges, halved by
# scan_ranges while a node refuses them.
AVS_LOG_BLOCK_RANGE = 50_000

_KINDS = {
    eigenlayer.REGISTERED: AvsEvent.Kind.REGISTRATION,
    eigenlayer.SPLIT_SET: AvsEvent.Kind.SPLIT,
    eigenlayer.DEFAULT_SPLIT_SET: AvsEvent.Kind.DEFAULT_SPLIT,
    eigenlayer.NOTICED: AvsEvent.Kind.NOTICED,
}


@dataclass(frozen=True)
class AvsIndexSummary:
    new: int
    removed: int  # orphaned by a reorg
    head: Block  # the confirmed head read up to: its time is the snapshot's "now"
    held: bool  # False while another LAT's job indexed the AVS (nothing read here)


def event_addresses(lat: Lat) -> list[str]:
    """The contracts whose events the rewards APY reads: the RewardsCoordinator and, where
    known, the AVSDirectory."""
    names = ("rewardsCoordinator", "avsDirectory")
    return [address for address in map(lat.core_contract, names) if address]


def avs_index(
    *, lat: Lat, gateway: Gateway, then: Callable[[Block], None] | None = None
) -> AvsIndexSummary:
    """Store the AVS's events since its checkpoint; then, still holding the AVS, `then(head)`
    (the AVS's days). Running twice adds nothing. While another LAT's job holds the AVS, nothing
    is read or written here and the head is only checked."""
    with advisory_lock(REWARDS_LOCK, lat.avs_id) as held:
        summary = _avs_index(lat, gateway, write=held)
        if held and then is not None and event_addresses(lat):
            then(summary.head)
        return summary


def _avs_index(lat: Lat, gateway: Gateway, *, write: bool) -> AvsIndexSummary:
    addresses = event_addresses(lat)
    stored = RewardsCheckpoint.objects.filter(avs_id=lat.avs_id).first()
    if not write or not addresses:
        start = index_start(
            lat=lat, gateway=gateway, checkpoint=None, origin=0, stored_blocks=lambda a, b: []
        )
        if write is False:
            logger.info("Events of AVS %s: another LAT's job is indexing them", lat.avs_id)
        return AvsIndexSummary(new=0, removed=0, head=start.head, held=write)
    origin = stored.origin if stored else _origin(lat, gateway, addresses)
    start = index_start(
        lat=lat,
        gateway=gateway,
        checkpoint=_checkpoint(stored),
        origin=origin,
        stored_blocks=_stored_blocks(lat.avs_id),
    )
    removed = avs_rewind(lat, start.rewind, gateway) if start.rewind else 0

    def fetch(first_block: int, last_block: int) -> list[eigenlayer.AvsLog]:
        logs = eigenlayer.avs_logs(
            gateway, addresses=addresses, from_block=first_block, to_block=last_block
        )
        return [log for log in logs if log.avs in ("", lat.avs.address)]

    new = 0
    for read in index_ranges(
        lat=lat,
        gateway=gateway,
        start=start,
        origin=origin,
        fetch=fetch,
        max_range=AVS_LOG_BLOCK_RANGE,
    ):
        with transaction.atomic():
            new += _store(lat, read)
            RewardsCheckpoint.objects.update_or_create(
                avs_id=lat.avs_id, defaults={**read.checkpoint.fields(), "origin": origin}
            )
    return AvsIndexSummary(new=new, removed=removed, head=start.head, held=True)


def _origin(lat: Lat, gateway: Gateway, addresses: Sequence[str]) -> int:
    """The first block where the coordinator or the directory has code; the LAT's deployment
    block where the node cannot tell (a node that keeps no history: the gaps say so)."""
    head = gateway.head_number()
    try:
        found = [first_block_with_code(gateway, a, high=head) for a in addresses]
    except ChainError as exc:
        logger.warning("AVS %s: history unreadable (%s); from the LAT's block", lat.avs_id, exc)
        return lat.deployment_block
    return min((block for block in found if block is not None), default=lat.deployment_block)


def _checkpoint(row: RewardsCheckpoint | None) -> Checkpoint | None:
    if row is None:
        return None
    return Checkpoint(row.block_number, row.block_hash, row.final_block, row.final_hash)


def _stored_blocks(avs_id: int):
    def stored(lowest: int, highest: int) -> list[tuple[int, str]]:
        blocks: set[tuple[int, str]] = set()
        for model in (RewardSubmission, AvsEvent):
            blocks.update(
                model.objects.filter(
                    avs_id=avs_id, block_number__gte=lowest, block_number__lte=highest
                ).values_list("block_number", "block_hash")
            )
        return sorted(blocks, reverse=True)

    return stored


def _store(lat: Lat, read: Range) -> int:
    submissions, events = [], []
    for log in read.logs:
        position = {
            "avs_id": lat.avs_id,
            "chain_id": lat.chain_id,
            "tx_hash": log.tx_hash,
            "log_index": log.log_index,
            "block_number": log.block_number,
            "block_hash": log.block_hash,
        }
        if log.kind in (eigenlayer.SUBMITTED, eigenlayer.OPERATOR_DIRECTED_SUBMITTED):
            submissions.append(RewardSubmission(kind=log.kind, **position, **_rewards(log)))
            continue
        events.append(
            AvsEvent(
                kind=_KINDS[log.kind],
                name=log.name,
                block_timestamp=read.blocks[log.block_number].timestamp,
                operator=log.operator,
                value=log.value,
                activated_at=log.activated_at,
                data=_noticed(log),
                **position,
            )
        )
    created = RewardSubmission.objects.bulk_create(submissions, ignore_conflicts=True)
    AvsEvent.objects.bulk_create(events, ignore_conflicts=True)
    return len(created) + len(events)


def _rewards(log: eigenlayer.AvsLog) -> dict:
    rewards = log.rewards
    assert rewards is not None
    return {
        "token": rewards.token,
        "amount": rewards.amount,
        "start_timestamp": rewards.start,
        "duration": rewards.duration,
        "strategies": list(rewards.strategies),
        "multipliers": [str(m) for m in rewards.multipliers],
        "operator_amounts": {op: str(amount) for op, amount in rewards.operator_amounts},
    }


def _noticed(log: eigenlayer.AvsLog) -> dict:
    if log.rewards is None:
        return {}
    return {
        "token": log.rewards.token,
        "amount": str(log.rewards.amount),
        "startTimestamp": log.rewards.start,
        "duration": log.rewards.duration,
    }


@transaction.atomic
def avs_rewind(lat: Lat, rewind: Rewind, gateway: Gateway) -> int:
    """Remove what the blocks after the fork stored for the AVS, and move back what was read
    of a state after it: the AVS's days from the fork's UTC day on (an event of that day decides
    who was registered all day), its LATs' days and rate points read at later blocks."""
    fork = rewind.fork
    removed = 0
    for model in (RewardSubmission, AvsEvent):
        count, _ = model.objects.filter(avs_id=lat.avs_id, block_number__gt=fork).delete()
        removed += count
    fork_day = utc_day(gateway.block(max(fork, 0)).timestamp)
    days_moved_back(avs_id=lat.avs_id, from_day=fork_day, after_block=fork)
    if rewind.checkpoint is None:
        RewardsCheckpoint.objects.filter(avs_id=lat.avs_id).delete()
    else:
        RewardsCheckpoint.objects.filter(avs_id=lat.avs_id).update(**rewind.checkpoint.fields())
    return removed


def days_moved_back(*, avs_id: int, from_day: date, after_block: int) -> None:
    """Forget the AVS's days from `from_day` on and everything of its LATs read after block
    `after_block`: the next run reads them again."""
    AvsDay.objects.filter(
        Q(avs_id=avs_id) & (Q(day__gte=from_day) | Q(block_number__gt=after_block))
    ).delete()
    LatDay.objects.filter(lat__avs_id=avs_id, block_number__gt=after_block).delete()
    RatePoint.objects.filter(lat__avs_id=avs_id, block_number__gt=after_block).delete()
