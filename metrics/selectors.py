"""Reads of historical metrics: a LAT's snapshots sampled at regular points."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

from lats.models import Lat
from metrics.models import MetricSnapshot

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

    TVL and APY are levels, the same for both variants. `totalUsers` is all depositors up to
    the point (`cumulative`) or those new in the period (`discrete`). Points before the first
    snapshot are left out.
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
    previous_users = before.total_users if before else 0
    for point in points:
        while index < len(snapshots) and snapshots[index].timestamp <= point:
            current = snapshots[index]
            index += 1
        if current is None:
            continue
        users = current.total_users
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
                total_users=users if variant == "cumulative" else users - previous_users,
            )
        )
        previous_users = users
    return out
