"""Reads of a chain's past, for the state a LAT or an AVS had at given times: the last block
before each of many times, and the first block where a contract has code.

Nothing here assumes a block time: the search interpolates between the blocks it has read, so
that a chain of regular slots is found in two or three rounds and an irregular one (a devnet
that mines on demand, days without a block) never in more rounds than a bisection takes. Every
round is one JSON-RPC batch for every time still open."""

from __future__ import annotations

import bisect
from collections.abc import Iterable

from chain.errors import ChainUnavailable
from chain.gateway import Gateway
from chain.results import Block

# Every BISECT_EVERY-th round halves the brackets instead of interpolating.
BISECT_EVERY = 3


def blocks_before(
    gateway: Gateway, times: Iterable[int], *, low: Block, high: Block
) -> dict[int, Block]:
    """For each Unix time `t`, the last block whose timestamp is below `t`: the state at `t`.

    `low` must be older than every time (its timestamp below each) and `high` is the newest
    block to consider: a time after `high`'s gets `high`."""
    known: dict[int, Block] = {low.number: low, high.number: high}
    answers: dict[int, Block] = {}
    open_times = []
    for t in sorted(set(times)):
        if t <= low.timestamp:
            raise ValueError(f"block {low.number} is not older than time {t}")
        if t > high.timestamp:
            answers[t] = high
        else:
            open_times.append(t)
    rounds = 0
    while open_times:
        rounds += 1
        numbers = sorted(known)
        stamps = [known[n].timestamp for n in numbers]
        probes: set[int] = set()
        still_open = []
        for t in open_times:
            i = bisect.bisect_left(stamps, t)  # the first known block at or after t
            a, b = numbers[i - 1], numbers[i]
            if b == a + 1:
                answers[t] = known[a]
                continue
            still_open.append(t)
            probes.update(_probes(t, known[a], known[b], bisect_only=rounds % BISECT_EVERY == 0))
        open_times = still_open
        if probes:
            wanted = probes - known.keys()
            fetched = gateway.blocks(wanted, missing_ok=True)
            if wanted - fetched.keys():
                raise ChainUnavailable("the node lost blocks below the head it reported")
            known.update(fetched)
    return answers


def _probes(t: int, a: Block, b: Block, *, bisect_only: bool) -> set[int]:
    """Blocks to read between a (before t) and b (at or after t): where t falls if the blocks
    between were evenly spaced in time, and the one after it, so that an exact guess closes the
    bracket in one round; the middle every BISECT_EVERY-th round."""
    inside = range(a.number + 1, b.number)
    if bisect_only or b.timestamp <= a.timestamp:
        return {(a.number + b.number) // 2}
    guess = a.number + (t - a.timestamp) * (b.number - a.number) // (b.timestamp - a.timestamp)
    return {n for n in (guess, guess + 1) if n in inside} or {(a.number + b.number) // 2}


def first_block_with_code(gateway: Gateway, address: str, *, high: int) -> int | None:
    """The first block at which `address` holds code (a bisection of eth_getCode at past
    blocks: an archive node's), or None when it holds none at `high`."""
    if not gateway.code_at(address, block=high):
        return None
    lo, hi = 0, high  # no code at lo - 1 (or lo is 0); code at hi
    while lo < hi:
        middle = (lo + hi) // 2
        if gateway.code_at(address, block=middle):
            hi = middle
        else:
            lo = middle + 1
    return lo


def first_block_with_state(gateway: Gateway, address: str, *, low: int, high: int) -> int | None:
    """The first block of [low, high] whose state the node keeps (a node that is not an archive
    prunes what is older: it refuses eth_getCode there), or None when it refuses even `high`. A
    bisection: a node keeps the state of every block after the first it keeps."""

    def kept(block: int) -> bool:
        try:
            gateway.code_at(address, block=block)
        except ChainUnavailable as exc:
            if not exc.refused:
                raise
            return False
        return True

    if not kept(high):
        return None
    lo, hi = low, high  # not kept below lo (or lo is `low`); kept at hi
    while lo < hi:
        middle = (lo + hi) // 2
        if kept(middle):
            hi = middle
        else:
            lo = middle + 1
    return lo


def state_kept_from(
    gateway: Gateway, address: str, refusal: ChainUnavailable, *, low: int, high: int
) -> int:
    """After the node refused a read of the state at `low`: the first block of (low, high]
    whose state it keeps (a node that is not an archive prunes the older ones). `refusal` is
    raised again where it was no such refusal: a failure to answer, or a refusal at a block
    whose state the node keeps (another limit of its own)."""
    if not refusal.refused:
        raise refusal
    first = first_block_with_state(gateway, address, low=low, high=high)
    if first is None or first <= low:
        raise refusal
    return first
