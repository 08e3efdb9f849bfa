"""GET /metrics/historical/lat/{address}: sampling, variants, windows."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from tests import factories as f

pytestmark = pytest.mark.django_db

A = f.address


def at(day: int, hour: int = 0) -> dt.datetime:
    return dt.datetime(2026, 5, day, hour, tzinfo=dt.UTC)


@pytest.fixture
def history(dataset):
    lat = dataset.eth_lat
    # Snapshots: before the window (day 1), then days 2, 3 (two), 5; holders now and ever.
    rows = [
        (at(1, 12), "10", 3, 4, "1.5"),
        (at(2, 6), "11", 5, 7, "2.0"),
        (at(3, 1), "12", 6, 8, "2.5"),
        (at(3, 20), "13", 9, 12, "3.0"),
        (at(5, 8), "15", 10, 13, "4.0"),
    ]
    for ts, tvl, users, ever, apy in rows:
        f.MetricSnapshotFactory(
            lat=lat,
            timestamp=ts,
            total_tvl_eth=Decimal(tvl),
            staked_tvl_eth=Decimal(tvl) / 2,
            unstaked_tvl_eth=Decimal(tvl) / 2,
            apy=Decimal(apy),
            base_apy=Decimal("1"),
            native_apy=Decimal("0.5"),
            total_apy=Decimal(apy) + 1,
            total_users=users,
            ever_holders=ever,
        )
    return dataset


URL = f"/metrics/historical/lat/{A(0x1001)}"


def test_daily_cumulative(api, history):
    response = api.get(URL, {"startAt": "2026-05-02T00:00:00", "endAt": "2026-05-05T00:00:00"})
    assert response.status_code == 200
    data = response.json()["data"]
    # Points at the ends of days 2..5 (00:00 of 02, 03, 04, 05), each the latest snapshot then.
    assert [p["timestamp"] for p in data] == [
        "2026-05-02T00:00:00Z",
        "2026-05-03T00:00:00Z",
        "2026-05-04T00:00:00Z",
        "2026-05-05T00:00:00Z",
    ]
    assert [p["totalTvlEth"] for p in data] == [10.0, 11.0, 13.0, 13.0]
    assert [p["totalUsers"] for p in data] == [3, 5, 9, 9]
    assert data[2] == {
        "timestamp": "2026-05-04T00:00:00Z",
        "totalTvlEth": 13.0,
        "stakedTvlEth": 6.5,
        "unstakedTvlEth": 6.5,
        "apy": 3.0,
        "baseApy": 1.0,
        "nativeApy": 0.5,
        "totalApy": 4.0,
        "totalUsers": 9,
    }


def test_daily_discrete_counts_new_users_per_period(api, history):
    data = api.get(
        URL, {"startAt": "2026-05-02", "endAt": "2026-05-05T00:00:00", "variant": "discrete"}
    ).json()["data"]
    # Addresses that ever held, at the points: 4, 7, 12, 12; at 2026-05-01T00:00, a period
    # earlier, none yet. New holders per period are the differences.
    assert [p["totalUsers"] for p in data] == [4, 3, 5, 0]
    assert [p["totalTvlEth"] for p in data] == [10.0, 11.0, 13.0, 13.0]


def test_weekly(api, history):
    data = api.get(
        URL, {"frequency": "7d", "startAt": "2026-04-20", "endAt": "2026-05-06T00:00:00"}
    ).json()["data"]
    # Points: 05-06, 04-29, 04-22; only 05-06 is after the first snapshot.
    assert [(p["timestamp"], p["totalTvlEth"]) for p in data] == [("2026-05-06T00:00:00Z", 15.0)]


def test_defaults_cover_last_31_days(api, history):
    response = api.get(URL)
    assert response.status_code == 200
    data = response.json()["data"]
    # 31 days back from now, a point a day, both ends included; the last snapshot (May 5)
    # is the level at every point since.
    assert len(data) == 32
    assert {p["totalTvlEth"] for p in data} == {15.0}
    first = dt.datetime.fromisoformat(data[0]["timestamp"])
    last = dt.datetime.fromisoformat(data[-1]["timestamp"])
    assert last - first == dt.timedelta(days=31)
    assert last.second == 0
    assert last.microsecond == 0


@pytest.mark.parametrize(
    "query",
    [
        {"startAt": "2026-05-05", "endAt": "2026-05-01"},
        {"startAt": "2025-01-01", "endAt": "2026-05-01"},
        {"frequency": "7d", "startAt": "2024-01-01", "endAt": "2026-05-01"},
        {"frequency": "2d"},
        {"variant": "sum"},
        {"startAt": "yesterday"},
        {"endAt": "2026-13-01"},
    ],
)
def test_bad_parameters_are_422(api, history, query):
    response = api.get(URL, query)
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "unprocessable_entity"


def test_unknown_lat_is_404(api, history):
    assert api.get(f"/metrics/historical/lat/{A(0x1009)}").status_code == 404
