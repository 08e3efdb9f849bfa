"""Checkpointed event indexing against a node that may be wrong, behind or reorganising.

Shared by the deposit indexer (deposits/) and the rewards indexer (metrics/). An index stores
rows (events, each with the hash of its block) and a checkpoint: the last block read, its hash,
and the hash of the block REORG_MAX_DEPTH below it, the *final* block: history at or below it
is taken as settled. A run goes:

1. `index_start`: the node must be on the LAT's chain (else `ChainMismatch`); its head must
   not be below the checkpoint and it must know the checkpoint block (else `NodeLagging`: the
   run is skipped, nothing is read further, deleted or written). When the checkpoint block's
   hash changed, the chain reorganised under it: the newest stored block between the final
   block and the checkpoint that the chain still has is the fork, and the caller removes the
   rows after it (`Start.rewind`) and reads on from there. When the final block's hash changed
   too, the reorg is deeper than REORG_MAX_DEPTH: `ReorgTooDeep`, nothing is deleted, and every
   run fails the same way (indexing of the LAT stopped) until ops look at it. The walk back
   reads at most REORG_MAX_DEPTH + 1 headers.
2. `index_ranges`: the blocks from there to the confirmed head in ranges of at most
   LOG_BLOCK_RANGE (`scan_ranges`: halved while the node refuses them). With each range's logs
   come, in one batch, the headers of the blocks that have logs, of the range's end, of its
   final block and of the run's head. A log whose blockHash is not its block's hash, or a head
   whose hash changed since the run began, means the node changed branch during the read: the
   range is read again, READ_ATTEMPTS times, then `ChainUnavailable` (Celery retries the job).
   The caller stores each range's rows with `Range.checkpoint` in one transaction, or several
   consecutive ranges' as one (`join_ranges`: the last one's checkpoint).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any, Protocol

from django.conf import settings

from chain.errors import ChainError, ChainUnavailable
from chain.gateway import Gateway, scan_ranges
from chain.results import Block
from lats.checks import (
    NodeLagging,
    chain_confirmations,
    check_chain,
    check_not_behind,
    reorg_max_depth,
)
from lats.models import Lat

logger = logging.getLogger(__name__)

# How many times a range whose logs and headers disagree is read before the run gives up.
READ_ATTEMPTS = 3


class ReorgTooDeep(ChainError):
    """A reorg reached a block taken as final: indexing stops instead of deleting history."""


class _Log(Protocol):
    block_number: int
    block_hash: str


@dataclass(frozen=True)
class Checkpoint:
    """How far an index has read: `block` and its hash, and the final block and its hash
    (None and "" when that block is before the first block the index reads)."""

    block: int
    hash: str
    final_block: int | None = None
    final_hash: str = ""

    def fields(self) -> dict[str, Any]:
        """The checkpoint models' columns."""
        return {
            "block_number": self.block,
            "block_hash": self.hash,
            "final_block": self.final_block,
            "final_hash": self.final_hash,
        }


@dataclass(frozen=True)
class Rewind:
    """A reorg under the checkpoint: the rows after block `fork` are orphaned and the index
    goes back to `checkpoint` (None: to before its first block)."""

    fork: int
    checkpoint: Checkpoint | None


@dataclass(frozen=True)
class Start:
    head: Block  # the confirmed head the run reads up to
    first: int  # the first block to read
    rewind: Rewind | None


# (lowest, highest) -> the distinct (block number, block hash) of the stored rows in that
# range of blocks, newest first.
StoredBlocks = Callable[[int, int], Sequence[tuple[int, str]]]


def index_start(
    *,
    lat: Lat,
    gateway: Gateway,
    checkpoint: Checkpoint | None,
    origin: int,
    stored_blocks: StoredBlocks,
) -> Start:
    """Check the node and the checkpoint (see the module docstring); `origin` is the first
    block the index reads."""
    check_chain(lat=lat, gateway=gateway)
    confirmations = chain_confirmations(lat.chain_id)
    head = gateway.head(confirmations=confirmations)
    if checkpoint is None:
        return Start(head=head, first=origin, rewind=None)
    if not checkpoint.hash:
        # Written before the index recorded hashes (rewards before metrics 0003): nothing to
        # compare, so it is trusted; the next range stored records the hashes.
        return Start(head=head, first=checkpoint.block + 1, rewind=None)
    # The confirmed head may sit below the checkpoint when confirmations grew: nothing to read.
    check_not_behind(
        Block(head.number + confirmations, head.hash, head.timestamp),
        checkpoint.block,
        "the checkpoint",
    )
    current = gateway.block_or_none(checkpoint.block)
    if current is None:
        raise NodeLagging(
            f"the node is lagging: it has no block {checkpoint.block}, the checkpoint; "
            "this run was skipped"
        )
    if current.hash == checkpoint.hash:
        return Start(head=head, first=checkpoint.block + 1, rewind=None)
    rewind = _rewind(lat, gateway, checkpoint, origin, stored_blocks)
    logger.warning(
        "Reorg under block %s of %s: re-indexing from block %s",
        checkpoint.block,
        lat.proxy_address,
        rewind.fork + 1,
    )
    return Start(head=head, first=rewind.fork + 1, rewind=rewind)


def _rewind(
    lat: Lat, gateway: Gateway, checkpoint: Checkpoint, origin: int, stored_blocks: StoredBlocks
) -> Rewind:
    """The fork of a reorg under the checkpoint, searched no deeper than the final block."""
    depth = reorg_max_depth(lat.chain_id)
    final = checkpoint.final_block if checkpoint.final_hash else None
    # A checkpoint without a final hash was written when the whole history was shallower than
    # the depth (then everything may be re-read), or before final hashes were recorded.
    bottom = final if final is not None else max(checkpoint.block - depth, origin - 1)
    rows = list(stored_blocks(bottom + 1, checkpoint.block - 1))
    canonical = gateway.blocks(
        {n for n, _ in rows} | ({final} if final is not None else set()), missing_ok=True
    )
    too_deep = ReorgTooDeep(
        f"the chain reorganised deeper than {depth} blocks below block {checkpoint.block} "
        f"(REORG_MAX_DEPTH): block {bottom}, indexed as final, is no longer on the chain. "
        "Indexing of this LAT is stopped and nothing was deleted; check the node"
    )
    if final is not None:
        if final not in canonical:
            raise NodeLagging(f"the node has no block {final}; this run was skipped")
        if canonical[final].hash != checkpoint.final_hash:
            raise too_deep
    for number, stored_hash in rows:
        if number in canonical and canonical[number].hash == stored_hash:
            return Rewind(
                fork=number,
                checkpoint=Checkpoint(
                    number, stored_hash, checkpoint.final_block, checkpoint.final_hash
                ),
            )
    if final is not None:
        return Rewind(fork=final, checkpoint=Checkpoint(final, checkpoint.final_hash))
    if bottom < origin:
        return Rewind(fork=origin - 1, checkpoint=None)
    raise too_deep  # nothing recorded proves the history below the walk unchanged


@dataclass(frozen=True)
class Range:
    first: int
    last: int
    logs: list[Any]
    blocks: dict[int, Block]  # the headers of the blocks with logs, of `last` and the head
    checkpoint: Checkpoint  # to store with the range's rows


def join_ranges(ranges: Sequence[Range]) -> Range:
    """Consecutive ranges as one, stored in one transaction with the last one's checkpoint."""
    if len(ranges) == 1:
        return ranges[0]
    for before, after in pairwise(ranges):
        if after.first != before.last + 1:
            raise ValueError(f"ranges not consecutive: {before.last} then {after.first}")
    return Range(
        first=ranges[0].first,
        last=ranges[-1].last,
        logs=[log for r in ranges for log in r.logs],
        blocks={number: block for r in ranges for number, block in r.blocks.items()},
        checkpoint=ranges[-1].checkpoint,
    )


def index_ranges(
    *,
    lat: Lat,
    gateway: Gateway,
    start: Start,
    origin: int,
    fetch: Callable[[int, int], list[Any]],
    max_range: int | None = None,
) -> Iterator[Range]:
    """Read the logs from `start.first` to the confirmed head, range by range, each checked
    against the headers read with it (see the module docstring)."""
    depth = reorg_max_depth(lat.chain_id)
    head = start.head

    def read(first: int, last: int) -> tuple[list[Any], dict[int, Block]]:
        wanted_final = {last - depth} if last - depth >= origin else set()
        for attempt in range(1, READ_ATTEMPTS + 1):
            logs = fetch(first, last)
            wanted = {log.block_number for log in logs} | {last, head.number} | wanted_final
            blocks = gateway.blocks(wanted, missing_ok=True)
            if wanted <= blocks.keys() and _consistent(logs, blocks, head):
                return logs, blocks
            logger.warning(
                "Blocks %s-%s of %s: logs and headers disagree (attempt %s of %s)",
                first,
                last,
                lat.proxy_address,
                attempt,
                READ_ATTEMPTS,
            )
        raise ChainUnavailable(
            f"the node answered blocks {first}-{last} inconsistently {READ_ATTEMPTS} times "
            "(logs whose block hash is not their block's, or a head that changed: a reorg "
            "under way or nodes out of step behind a load balancer)"
        )

    ranges = scan_ranges(
        read, start=start.first, end=head.number, max_range=max_range or settings.LOG_BLOCK_RANGE
    )
    for first, last, (logs, blocks) in ranges:
        final = last - depth
        checkpoint = (
            Checkpoint(last, blocks[last].hash, final, blocks[final].hash)
            if final >= origin
            else Checkpoint(last, blocks[last].hash)
        )
        yield Range(first=first, last=last, logs=logs, blocks=blocks, checkpoint=checkpoint)


def _consistent(logs: list[_Log], blocks: dict[int, Block], head: Block) -> bool:
    return blocks[head.number].hash == head.hash and all(
        blocks[log.block_number].hash == log.block_hash for log in logs
    )
