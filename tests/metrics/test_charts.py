"""The LAT admin's charts (metrics/charts.py, metrics/svg.py): a history written by hand, the
pixels its values must land on computed here from the plot area and the axis each chart's
values call for, gaps where a value is unknown or a day missing, the note of an empty history,
a bounded number of queries over a year of data, and the LAT's admin page that shows them."""

from __future__ import annotations

import datetime as dt
import xml.etree.ElementTree as ET
from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from metrics import svg
from metrics.charts import DAYS, lat_charts
from metrics.models import MetricSnapshot, RatePoint
from tests import factories as f
from tests.adminpages import change_url

pytestmark = pytest.mark.django_db

NS = {"svg": "http://www.w3.org/2000/svg"}
TODAY = dt.date(2026, 3, 10)
E18 = 10**18


def at(day: dt.date, hour: int = 0, minute: int = 0) -> dt.datetime:
    return dt.datetime(day.year, day.month, day.day, hour, minute, tzinfo=dt.UTC)


def march(day: int) -> dt.date:
    return dt.date(2026, 3, day)


def snapshot(lat, when: dt.datetime, *, total, staked, apy, native, total_apy) -> None:
    f.MetricSnapshotFactory(
        lat=lat,
        timestamp=when,
        total_assets=1,
        total_supply=1,
        total_tvl_eth=None if total is None else Decimal(total),
        staked_tvl_eth=None if staked is None else Decimal(staked),
        apy=None if apy is None else Decimal(apy),
        native_apy=Decimal(native),
        total_apy=None if total_apy is None else Decimal(total_apy),
    )


def rate_point(lat, when: dt.datetime, assets: int, supply: int) -> None:
    RatePoint.objects.create(
        lat=lat, hour=when, block_number=1, total_assets=assets, total_supply=supply
    )


@pytest.fixture
def lat():
    return f.LatFactory(symbol="cLAT")


@pytest.fixture
def history(lat):
    """March 2026, days 1 to 7: day 3 unknown (TVL, apy, totalApy), day 5 without a snapshot,
    day 7's apy unknown; the exchange rate on days 1, 2, 3 and 5. Rows that must not count: a
    day's earlier snapshot, a rate point other than the day's hour 23, rows before the window
    (TODAY and the 364 days before it) and after TODAY."""
    rows = [  # day, hour, total, staked, apy, nativeApy, totalApy
        (1, 10, "50", "20", "9", "9", "9"),  # not the day's last
        (1, 23, "40", "10", "2", "1", "3"),
        (2, 23, "60", "30", "4", "2", "6"),
        (3, 12, None, None, None, "1.5", None),
        (4, 12, "100", "50", "6", "-1", "8"),
        (6, 12, "80", "40", "5", "2", "7"),
        (7, 12, "20", "0", None, "1", None),
    ]
    for day, hour, total, staked, apy, native, total_apy in rows:
        snapshot(
            lat,
            at(march(day), hour),
            total=total,
            staked=staked,
            apy=apy,
            native=native,
            total_apy=total_apy,
        )
    for when in (at(TODAY - dt.timedelta(days=DAYS), 23), at(TODAY + dt.timedelta(days=1), 1)):
        snapshot(lat, when, total="500", staked="500", apy="50", native="50", total_apy="50")
        rate_point(lat, when.replace(hour=23), 3 * E18, E18)
    rate_point(lat, at(march(1), 23), E18, E18)  # 1
    rate_point(lat, at(march(2), 23), 101 * E18, 100 * E18)  # 1.01
    rate_point(lat, at(march(3), 12), 150 * E18, 100 * E18)  # not the day's hour 23
    rate_point(lat, at(march(3), 23), 104 * E18, 100 * E18)  # 1.04
    rate_point(lat, at(march(5), 23), 103 * E18 + 1, 100 * E18)  # 1.03 and 1e-20: truncated
    lat.apys = {
        "current": {"apy": "4.5", "baseApy": "0", "nativeApy": "1.256", "totalApy": None},
        "trailing7d": {"apy": "3", "baseApy": "0", "nativeApy": "0.1", "totalApy": "3"},
    }
    lat.save()
    return lat


def shapes(chart_svg: str, series: str) -> tuple[list[list[tuple[float, float]]], list]:
    """A series' polylines (their points) and dots, from the SVG as a browser parses it."""
    group = ET.fromstring(chart_svg).find(f"svg:g[@data-series='{series}']", NS)
    assert group is not None, series
    lines = [
        [tuple(map(float, pair.split(","))) for pair in line.get("points").split()]
        for line in group.findall("svg:polyline", NS)
    ]
    dots = [(float(c.get("cx")), float(c.get("cy"))) for c in group.findall("svg:circle", NS)]
    return lines, dots


def labels(chart_svg: str, kind: str) -> list[str]:
    root = ET.fromstring(chart_svg)
    return [t.text for t in root.findall(f"svg:text[@class='chart-label chart-{kind}-label']", NS)]


def pixel(day: int, value: float, *, span: int, low: float, high: float) -> tuple[float, float]:
    """Where day `day` (from the chart's first) and `value` belong: the plot area's left to
    right over `span` days, its bottom to top over low..high."""
    width = svg.PLOT_RIGHT - svg.PLOT_LEFT
    height = svg.PLOT_BOTTOM - svg.PLOT_TOP
    return (
        svg.PLOT_LEFT + day / span * width,
        svg.PLOT_BOTTOM - (value - low) / (high - low) * height,
    )


def assert_points(actual, expected) -> None:
    """Points, or lists of points, equal to the SVG's one decimal."""
    assert len(actual) == len(expected), (actual, expected)
    for got, want in zip(actual, expected, strict=True):
        if isinstance(want, list):
            assert_points(got, want)
        else:
            assert got == pytest.approx(want, abs=0.051), (actual, expected)


def test_tvl_points_land_on_their_values_with_gaps(history):
    chart = lat_charts(lat=history, today=TODAY).tvl
    assert chart.days == tuple(march(d) for d in (1, 2, 3, 4, 6, 7))
    drawn = str(chart.svg())
    # 0 to 100 ETH in steps of 50 (a quarter of 100 is 25, rounded up to 1, 2 or 5 x 10^n);
    # days 1..7 of March across the plot.
    assert labels(drawn, "y") == ["0", "50", "100"]
    assert labels(drawn, "x") == [f"2026-03-0{d}" for d in range(1, 8)]

    def p(day: int, value: float) -> tuple[float, float]:
        return pixel(day - 1, value, span=6, low=0, high=100)

    lines, dots = shapes(drawn, "total")
    # Day 3 unknown: a gap; day 4 alone between the gap and the missing day 5: a dot.
    assert len(lines) == 2
    assert_points(lines[0], [p(1, 40), p(2, 60)])
    assert_points(lines[1], [p(6, 80), p(7, 20)])
    assert_points(dots, [p(4, 100)])
    lines, dots = shapes(drawn, "staked")
    assert_points(lines[0], [p(1, 10), p(2, 30)])
    assert_points(lines[1], [p(6, 40), p(7, 0)])
    assert_points(dots, [p(4, 50)])
    assert lines[1][1][1] == svg.PLOT_BOTTOM  # a 0 is drawn as 0; the unknown day is not
    assert chart.latest() == (march(7), [("total", "20.0000"), ("staked", "0.0000")])


def test_apy_points_land_on_their_values_with_gaps(history):
    chart = lat_charts(lat=history, today=TODAY).apy
    drawn = str(chart.svg())
    # -1 to 8 with 0 in range: a quarter of 9 is 2.25, rounded up to 5: -5 to 10.
    assert labels(drawn, "y") == ["-5", "0", "5", "10"]

    def p(day: int, value: float) -> tuple[float, float]:
        return pixel(day - 1, value, span=6, low=-5, high=10)

    lines, dots = shapes(drawn, "nativeApy")  # known every day there is a snapshot
    assert_points(lines[0], [p(1, 1), p(2, 2), p(3, 1.5), p(4, -1)])
    assert_points(lines[1], [p(6, 2), p(7, 1)])
    assert dots == []
    for series, values in (("apy", (2, 4, 6, 5)), ("totalApy", (3, 6, 8, 7))):
        lines, dots = shapes(drawn, series)
        assert_points(lines, [[p(1, values[0]), p(2, values[1])]])
        assert_points(dots, [p(4, values[2]), p(6, values[3])])


def test_rate_is_the_days_hour_23_point_exactly(history):
    chart = lat_charts(lat=history, today=TODAY).rate
    assert chart.days == (march(1), march(2), march(3), march(5))
    assert chart.unit == "ETH per cLAT"
    drawn = str(chart.svg())
    # 1 to 1.04, not from 0: a quarter of 0.04 is 0.01.
    assert labels(drawn, "y") == ["1.00", "1.01", "1.02", "1.03", "1.04"]
    assert labels(drawn, "x") == [
        "2026-03-01",
        "2026-03-02",
        "2026-03-03",
        "2026-03-04",
        "2026-03-05",
    ]

    def p(day: int, value: float) -> tuple[float, float]:
        return pixel(day - 1, value, span=4, low=1, high=1.04)

    lines, dots = shapes(drawn, "rate")
    assert_points(lines, [[p(1, 1), p(2, 1.01), p(3, 1.04)]])
    assert_points(dots, [p(5, 1.03)])  # day 4 has no point: a gap
    # rate_text's 18 decimals: 103e18 + 1 over 100e18 is 1.03000000000000000001, truncated.
    assert chart.latest() == (march(5), [("rate", "1.03")])


def test_the_window_is_the_last_365_days(history):
    charts = lat_charts(lat=history, today=TODAY)
    assert (charts.first_day, charts.last_day) == (TODAY - dt.timedelta(days=364), TODAY)
    snapshot(
        history, at(charts.first_day), total="1", staked="1", apy="1", native="1", total_apy="1"
    )
    rate_point(history, at(charts.first_day, 23), E18, E18)
    again = lat_charts(lat=history, today=TODAY)
    assert again.tvl.days[0] == again.rate.days[0] == charts.first_day
    assert again.tvl.days[1:] == charts.tvl.days


def test_apy_windows_table(history):
    rows = {row.window: row.values for row in lat_charts(lat=history, today=TODAY).apy_windows}
    assert list(rows) == [
        "current",
        "avg30d",
        "trailing7d",
        "trailing30d",
        "trailing3m",
        "trailing6m",
        "trailing1y",
    ]
    assert rows["current"] == ("4.50", "1.26", "unknown")  # totalApy null: no coordinator
    assert rows["trailing7d"] == ("3.00", "0.10", "3.00")
    assert rows["avg30d"] == ("0.00", "0.00", "0.00")  # nothing recorded yet


def test_the_svg_names_itself(history):
    drawn = str(lat_charts(lat=history, today=TODAY).tvl.svg())
    root = ET.fromstring(drawn)
    assert root.get("role") == "img"
    assert root.get("aria-labelledby") == "lat-chart-tvl-title lat-chart-tvl-desc"
    title = root.find("svg:title", NS)
    assert title.get("id") == "lat-chart-tvl-title"
    assert title.text == "TVL in ETH, one point a day (UTC), 2026-03-01 to 2026-03-07"
    desc = root.find("svg:desc", NS).text
    assert (
        "total: known on 5 of 6 days, from 20.0000 to 100.0000 ETH, 20.0000 on 2026-03-07" in desc
    )
    assert "gaps" in desc


def test_no_history_yet(admin_client, lat):
    charts = lat_charts(lat=lat)
    assert all(chart.empty and chart.days == () for chart in charts.charts)
    page = admin_client.get(change_url(lat)).content.decode()
    assert page.count("No history yet.") == 3
    assert 'class="lat-chart"' not in page
    assert "lat-apy-windows" in page  # the windows, all "0" until the first snapshot


def test_unknown_every_day_is_no_history_either(lat):
    for day in (1, 2):
        snapshot(lat, at(march(day)), total=None, staked=None, apy=None, native="0", total_apy=None)
    charts = lat_charts(lat=lat, today=TODAY)
    assert charts.tvl.empty
    assert not charts.apy.empty  # nativeApy is known
    assert charts.tvl.latest() is None


def test_single_day_sits_in_the_middle(lat):
    snapshot(lat, at(march(2)), total="3", staked="1", apy="1", native="1", total_apy="1")
    drawn = str(lat_charts(lat=lat, today=TODAY).tvl.svg())
    lines, dots = shapes(drawn, "total")
    assert lines == []
    # The middle of the plot; 3 is the top of 0..3 (a quarter of 3 is 0.75, rounded up to 1).
    assert dots == [((svg.PLOT_LEFT + svg.PLOT_RIGHT) / 2, svg.PLOT_TOP)]
    assert labels(drawn, "y") == ["0", "1", "2", "3"]
    assert labels(drawn, "x") == ["2026-03-02"]


def test_rounding_dust_draws_a_flat_rate(lat):
    """Rates 1e-18 apart (rounding) would need ticks of 18 decimals: drawn as a flat line, one
    step either side of 1 (a 40th of 1 is 0.025, rounded up to 0.05)."""
    rate_point(lat, at(march(1), 23), E18, E18)
    rate_point(lat, at(march(2), 23), E18 + 1, E18)
    chart = lat_charts(lat=lat, today=TODAY).rate
    assert chart.latest() == (march(2), [("rate", "1.000000000000000001")])  # exact all the same
    drawn = str(chart.svg())
    assert labels(drawn, "y") == ["0.95", "1.00", "1.05"]
    lines, _ = shapes(drawn, "rate")
    assert_points(lines, [[pixel(d, 1, span=1, low=0.95, high=1.05) for d in (0, 1)]])


def test_zeros_on_a_scale_of_one(lat):
    snapshot(lat, at(march(1)), total="0", staked="0", apy="0", native="0", total_apy="0")
    snapshot(lat, at(march(2)), total="0", staked="0", apy="0", native="0", total_apy="0")
    drawn = str(lat_charts(lat=lat, today=TODAY).tvl.svg())
    assert labels(drawn, "y") == ["0.0", "0.5", "1.0"]  # a quarter of 1 rounded up to 0.5
    lines, _ = shapes(drawn, "total")
    assert_points(lines, [[(svg.PLOT_LEFT, svg.PLOT_BOTTOM), (svg.PLOT_RIGHT, svg.PLOT_BOTTOM)]])


# --- a year of history: the same few queries, one point per day --------------------------------


def a_year(lat, days: int = DAYS, today: dt.date = TODAY) -> None:
    first = today - dt.timedelta(days=days - 1)
    snapshots, points = [], []
    for n in range(days):
        day = first + dt.timedelta(days=n)
        for hour in (5, 17):
            snapshots.append(
                MetricSnapshot(
                    lat=lat,
                    timestamp=at(day, hour),
                    total_assets=1,
                    total_supply=1,
                    total_tvl_eth=Decimal(n),
                    staked_tvl_eth=Decimal(n) / 2,
                    apy=Decimal(1),
                    native_apy=Decimal(2),
                    total_apy=Decimal(3),
                )
            )
        for hour in (11, 23):
            points.append(
                RatePoint(
                    lat=lat,
                    hour=at(day, hour),
                    block_number=n * 100 + hour,
                    total_assets=E18 + n * 10**15,
                    total_supply=E18,
                )
            )
    MetricSnapshot.objects.bulk_create(snapshots)
    RatePoint.objects.bulk_create(points)


def test_a_year_takes_two_queries(lat, django_assert_max_num_queries):
    a_year(lat)
    with django_assert_max_num_queries(2):
        charts = lat_charts(lat=lat, today=TODAY)
        drawn = [str(chart.svg()) for chart in charts.charts]
    for chart, series in ((drawn[0], "total"), (drawn[1], "apy"), (drawn[2], "rate")):
        lines, dots = shapes(chart, series)
        assert [len(line) for line in lines] == [DAYS]
        assert dots == []
    # 2025-03-11 to 2026-03-10: the first of every other month labelled.
    assert labels(drawn[0], "x") == [
        "2025-04-01",
        "2025-06-01",
        "2025-08-01",
        "2025-10-01",
        "2025-12-01",
        "2026-02-01",
    ]
    assert labels(drawn[2], "y") == ["1.0", "1.1", "1.2", "1.3", "1.4"]  # 1 to 1.364


def test_change_page_queries_do_not_grow_with_history(
    admin_client, lat, django_assert_max_num_queries
):
    url = change_url(lat)
    admin_client.get(url)  # the session and content types
    with CaptureQueriesContext(connection) as empty:
        assert admin_client.get(url).status_code == 200
    a_year(lat, DAYS + 30, timezone.now().date())  # a month more than the window
    with django_assert_max_num_queries(len(empty)):
        page = admin_client.get(url).content.decode()
    assert page.count('class="chart-line"') == 6  # total, staked, 3 APYs, rate
    assert "No history yet" not in page
