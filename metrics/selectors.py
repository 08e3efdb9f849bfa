"""Reads of a LAT's metrics: its TVL (from stored balances and node shares), its APY windows,
and its history (snapshots sampled at regular points)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal

from lats.models import Lat
from lats.selectors import LatRecord, TokenLink
from lats.values import to_eth
from metrics.models import MetricSnapshot
from operators.models import NodeAsset

APY_WINDOWS = (
    "current",
    "avg30d",
    "trailing7d",
    "trailing30d",
    "trailing3m",
    "trailing6m",
    "trailing1y",
)
APY_FIELDS = ("apy", "baseApy", "nativeApy", "totalApy")

STEPS = {"1d": timedelta(days=1), "7d": timedelta(days=7)}
MAX_WINDOW = {"1d": timedelta(days=365), "7d": timedelta(days=720)}
DEFAULT_WINDOW = {"1d": timedelta(days=31), "7d": timedelta(days=365)}


@dataclass(frozen=True)
class HistoricalPoint:
    timestamp: datetime
    total_tvl_eth: Decimal
    staked_tvl_eth: Decimal
    unstaked_tvl_eth: Decimal
    apy: Decimal
    base_apy: Decimal
    native_apy: Decimal
    total_apy: Decimal
    total_users: int


def _points(start: datetime, end: datetime, step: timedelta) -> list[datetime]:
    """Period ends from `end` back to `start`, oldest first, `step` apart."""
    points = []
    point = end
    while point >= start:
        points.append(point)
        point -= step
    return points[::-1]


def lat_history(
    *, lat: Lat, frequency: str, variant: str, start: datetime, end: datetime
) -> list[HistoricalPoint]:
    """One point per period: the latest snapshot at or before the period's end.

    TVL and APY are levels, the same for both variants. `totalUsers` is the holders at the
    point (balance above zero, `cumulative`) or the addresses that became holders for the first
    time in the period (`discrete`). Points before the first snapshot are left out.
    """
    step = STEPS[frequency]
    points = _points(start, end, step)
    if not points:
        return []
    earliest = points[0] - step
    snapshots = list(
        MetricSnapshot.objects.filter(lat=lat, timestamp__gt=earliest, timestamp__lte=end).order_by(
            "timestamp"
        )
    )
    before = (
        MetricSnapshot.objects.filter(lat=lat, timestamp__lte=earliest)
        .order_by("-timestamp")
        .first()
    )
    out: list[HistoricalPoint] = []
    index = 0
    current = before
    previous_ever = before.ever_holders if before else 0
    for point in points:
        while index < len(snapshots) and snapshots[index].timestamp <= point:
            current = snapshots[index]
            index += 1
        if current is None:
            continue
        out.append(
            HistoricalPoint(
                timestamp=point,
                total_tvl_eth=current.total_tvl_eth,
                staked_tvl_eth=current.staked_tvl_eth,
                unstaked_tvl_eth=current.unstaked_tvl_eth,
                apy=current.apy,
                base_apy=current.base_apy,
                native_apy=current.native_apy,
                total_apy=current.total_apy,
                total_users=current.total_users
                if variant == "cumulative"
                else current.ever_holders - previous_ever,
            )
        )
        previous_ever = current.ever_holders
    return out


# --- TVL and APYs ---------------------------------------------------------------------------


def staked_amounts(*, lat_id: int) -> dict[int, Decimal]:
    """token id -> amount staked in the LAT's nodes, token units.

    Summed here, not with SUM(): uint256 values overflow SQLite's 64-bit SUM.
    """
    totals: dict[int, Decimal] = {}
    rows = NodeAsset.objects.filter(node__lat_id=lat_id).values_list("token_id", "staked_amount")
    for token_id, amount in rows:
        totals[token_id] = totals.get(token_id, Decimal(0)) + Decimal(amount)
    return totals


@dataclass(frozen=True)
class Tvl:
    tvl: Decimal
    unstaked_tvl: Decimal
    staked_tvl: Decimal
    queued_tvl: Decimal
    tvl_assets: dict[str, Decimal] = field(default_factory=dict)
    tvl_assets_eth: dict[str, Decimal] = field(default_factory=dict)


def lat_tvl(*, lat: Lat | LatRecord, links: list[TokenLink]) -> Tvl:
    """TVL from stored balances and node shares (decisions.md, Values)."""
    staked = staked_amounts(lat_id=lat.id)
    unstaked_eth = staked_eth = queued_eth = Decimal(0)
    assets: dict[str, Decimal] = {}
    assets_eth: dict[str, Decimal] = {}
    for link in links:
        symbol = link.symbol
        staked_amount = staked.get(link.token_id, Decimal(0))
        total = Decimal(link.balance) + Decimal(link.queued_balance) + staked_amount
        assets[symbol] = total / (Decimal(10) ** link.decimals)
        assets_eth[symbol] = to_eth(lat, link, total)
        unstaked_eth += to_eth(lat, link, Decimal(link.balance))
        queued_eth += to_eth(lat, link, Decimal(link.queued_balance))
        staked_eth += to_eth(lat, link, staked_amount)
    return Tvl(
        tvl=unstaked_eth + staked_eth + queued_eth,
        unstaked_tvl=unstaked_eth,
        staked_tvl=staked_eth,
        queued_tvl=queued_eth,
        tvl_assets=assets,
        tvl_assets_eth=assets_eth,
    )


def lat_apys(*, lat: Lat | LatRecord) -> dict[str, dict[str, str]]:
    """Stored APY windows, every window and member present ("0" where nothing is known)."""
    stored = lat.apys or {}
    return {
        window: {name: str((stored.get(window) or {}).get(name, "0")) for name in APY_FIELDS}
        for window in APY_WINDOWS
    }


def tvl_document(tvl: Tvl) -> dict:
    return {
        "tvl": float(tvl.tvl),
        "unstakedTvl": float(tvl.unstaked_tvl),
        "stakedTvl": float(tvl.staked_tvl),
        "queuedTvl": float(tvl.queued_tvl),
        "tvlAssets": {k: float(v) for k, v in tvl.tvl_assets.items()},
        "tvlAssetsEth": {k: float(v) for k, v in tvl.tvl_assets_eth.items()},
    }
