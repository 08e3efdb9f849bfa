"""A LAT's exchange rate over time (extensions.md, "Yields"): its totalAssets and totalSupply
at the last block of every UTC hour since its first block (`RatePoint`). The first run after a
LAT is imported reads them all from an archive node (a few hundred JSON-RPC batches for a
year), every later run only the hours that ended since; a reorg moves the points read after its
fork back (metrics/avs.py). The rates endpoint and `nativeApy` read them."""

from __future__ import annotations

import logging

from chain.abi import function
from chain.errors import ChainCallReverted, ChainUnavailable
from chain.gateway import Gateway
from chain.history import blocks_before, state_kept_from
from chain.results import Block
from lats.models import Lat
from metrics.models import RatePoint
from metrics.timeline import HOUR, as_datetime, hour_of

logger = logging.getLogger(__name__)

# Hours read per round (block search, reads, one INSERT).
HOURS_PER_ROUND = 2_000


def rates_update(*, lat: Lat, gateway: Gateway, head: Block) -> int:
    """Store the points of every hour that has ended since the last one stored (since the LAT's
    first block on the first run), up to `head`; returns how many were stored."""
    last = RatePoint.objects.filter(lat=lat).order_by("-hour").first()
    if last is None:
        low = gateway.block(lat.deployment_block)
        first_hour = hour_of(low.timestamp)
    else:
        low = gateway.block(last.block_number)
        first_hour = int(last.hour.timestamp()) + HOUR
    hours = list(range(first_hour, hour_of(head.timestamp), HOUR))  # the hours that have ended
    stored = 0
    for i in range(0, len(hours), HOURS_PER_ROUND):
        chunk = hours[i : i + HOURS_PER_ROUND]
        ends = blocks_before(gateway, [h + HOUR for h in chunk], low=low, high=head)
        blocks = {h: ends[h + HOUR] for h in chunk}
        totals = _kept_totals(lat, gateway, blocks, head)
        points = [
            RatePoint(
                lat=lat,
                hour=as_datetime(h),
                block_number=block.number,
                total_assets=totals[block.number][0],
                total_supply=totals[block.number][1],
            )
            for h, block in blocks.items()
            if block.number in totals
        ]
        RatePoint.objects.bulk_create(points, ignore_conflicts=True)
        stored += len(points)
        low = blocks[chunk[-1]]
    return stored


def _kept_totals(lat: Lat, gateway: Gateway, blocks: dict[int, Block], head: Block):
    """`_totals` at the blocks; where the node refuses one (a node that is not an archive keeps
    no state that old), at those from the first block whose state it keeps."""
    numbers = {b.number for b in blocks.values()}
    try:
        return _totals(lat, gateway, numbers)
    except ChainUnavailable as exc:
        first_kept = state_kept_from(
            gateway, lat.proxy_address, exc, low=min(numbers), high=head.number
        )
    logger.warning(
        "%s: the node keeps no state before block %s: rate points from there on",
        lat.proxy_address,
        first_kept,
    )
    return _totals(lat, gateway, {n for n in numbers if n >= first_kept})


def _totals(lat: Lat, gateway: Gateway, blocks: set[int]) -> dict[int, tuple[int, int]]:
    """totalAssets() and totalSupply() at each block; a block where they do not answer (the
    proxy not initialised yet) is left out."""
    calls = [
        (lat.proxy_address, function("LiquidToken", "totalAssets"), ()),
        (lat.proxy_address, function("LiquidToken", "totalSupply"), ()),
    ]
    out = {}
    for block, (assets, supply) in gateway.multicall_at(calls, blocks=sorted(blocks)).items():
        if isinstance(assets, ChainCallReverted) or isinstance(supply, ChainCallReverted):
            continue
        out[block] = (int(assets[0]), int(supply[0]))
    return out
