"""What the LAT admin's charts show: the last DAYS UTC days of a LAT, from stored data only, in
two queries whatever the history's length. TVL in ETH and the APYs are the day's last
`MetricSnapshot`; the exchange rate is the day's `RatePoint` as `rate_page(interval="day")`
picks it (hour 23: the state at the day's last block); the APY windows are the LAT's own
(`Lat.apys`). A day without a row is left out; a null value stays None (a gap, never 0).
metrics/svg.py draws them."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal, InvalidOperation

from django.db.models import Max
from django.db.models.functions import TruncDate
from django.utils import timezone
from django.utils.safestring import SafeString

from core.addresses import is_beacon_chain_eth
from lats.models import Lat
from metrics.models import MetricSnapshot
from metrics.selectors import APY_WINDOWS, lat_apys, rate_page
from metrics.svg import line_chart

DAYS = 365
APY_MEMBERS = ("apy", "nativeApy", "totalApy")


@dataclass(frozen=True)
class Series:
    key: str  # the SVG group's data-series
    label: str  # the legend's
    values: tuple[Decimal | None, ...]  # one per day of the chart, None where unknown


@dataclass(frozen=True)
class Chart:
    key: str  # "tvl", "apy", "rate": the SVG's data-chart and its ids
    title: str
    unit: str  # the y axis's title
    days: tuple[date, ...]  # the days with a row, oldest first
    series: tuple[Series, ...]
    zero_based: bool = True  # the y axis starts at 0 (not for the rate, which moves little)
    places: int | None = None  # decimals shown in the latest values (None: every digit)

    @property
    def empty(self) -> bool:
        """No day has a known value: the page shows a note instead of a chart."""
        return all(value is None for s in self.series for value in s.values)

    def latest(self) -> tuple[date, list[tuple[str, str]]] | None:
        """The last day with a known value, and each series' value that day ("unknown" for
        None)."""
        for index in range(len(self.days) - 1, -1, -1):
            values = [s.values[index] for s in self.series]
            if any(value is not None for value in values):
                return self.days[index], [
                    (s.label, self.text(value))
                    for s, value in zip(self.series, values, strict=True)
                ]
        return None

    def text(self, value: Decimal | None) -> str:
        if value is None:
            return "unknown"
        if self.places is None:
            return format(value.normalize(), "f")
        return f"{value:,.{self.places}f}"

    def svg(self) -> SafeString:
        return line_chart(self)


@dataclass(frozen=True)
class ApyWindow:
    window: str  # APY_WINDOWS' name
    values: tuple[str, ...]  # APY_MEMBERS' percentages, two decimals, or "unknown"


@dataclass(frozen=True)
class LatCharts:
    first_day: date
    last_day: date
    tvl: Chart
    apy: Chart
    rate: Chart
    apy_windows: tuple[ApyWindow, ...]

    @property
    def charts(self) -> tuple[Chart, Chart, Chart]:
        return self.tvl, self.apy, self.rate


def lat_charts(*, lat: Lat, today: date | None = None) -> LatCharts:
    """The LAT's charts over the DAYS UTC days ending with `today` (the current UTC day by
    default)."""
    last = today or timezone.now().astimezone(UTC).date()
    first = last - timedelta(days=DAYS - 1)
    since = datetime(first.year, first.month, first.day, tzinfo=UTC)
    until = since + timedelta(days=DAYS)
    snapshots = _daily_snapshots(lat, since, until)
    days = tuple(row[0].astimezone(UTC).date() for row in snapshots)

    def column(index: int) -> tuple[Decimal | None, ...]:
        return tuple(row[index] for row in snapshots)

    tvl = Chart(
        key="tvl",
        title="TVL in ETH",
        unit="ETH",
        days=days,
        series=(Series("total", "total", column(1)), Series("staked", "staked", column(2))),
        places=4,
    )
    apy = Chart(
        key="apy",
        title="APY (the current window at each snapshot)",
        unit="percent",
        days=days,
        series=(
            Series("apy", "apy", column(3)),
            Series("nativeApy", "nativeApy", column(4)),
            Series("totalApy", "totalApy", column(5)),
        ),
        places=2,
    )
    rates = rate_page(
        lat=lat, interval="day", start=since, end=until - timedelta(days=1), after=None
    )
    rate = Chart(
        key="rate",
        title="Exchange rate (totalAssets / totalSupply)",
        unit=f"{_unit_of_account(lat)} per {lat.symbol}",
        days=tuple(point["timestamp"].astimezone(UTC).date() for point in rates.points),
        series=(Series("rate", "rate", tuple(Decimal(p["rate"]) for p in rates.points)),),
        zero_based=False,
    )
    return LatCharts(first, last, tvl, apy, rate, _apy_windows(lat))


def _daily_snapshots(lat: Lat, since: datetime, until: datetime) -> list[tuple]:
    """Each UTC day's last snapshot in since..until (one query), oldest first: its time,
    total and staked TVL in ETH, apy, nativeApy and totalApy."""
    in_window = MetricSnapshot.objects.filter(lat=lat, timestamp__gte=since, timestamp__lt=until)
    last_of_day = (
        in_window.annotate(day=TruncDate("timestamp", tzinfo=UTC))
        .values("day")
        .annotate(last=Max("timestamp"))
        .values("last")
    )
    return list(
        in_window.filter(timestamp__in=last_of_day)
        .order_by("timestamp")
        .values_list(
            "timestamp", "total_tvl_eth", "staked_tvl_eth", "apy", "native_apy", "total_apy"
        )
    )


def _unit_of_account(lat: Lat) -> str:
    if lat.base_asset_symbol:
        return lat.base_asset_symbol
    return "ETH" if is_beacon_chain_eth(lat.base_asset) else "units of account"


def _apy_windows(lat: Lat) -> tuple[ApyWindow, ...]:
    stored = lat_apys(lat=lat)
    return tuple(
        ApyWindow(window, tuple(_percent(stored[window][name]) for name in APY_MEMBERS))
        for window in APY_WINDOWS
    )


def _percent(value: str | None) -> str:
    if value is None:
        return "unknown"
    try:
        return f"{Decimal(value):.2f}"
    except InvalidOperation:
        return value
