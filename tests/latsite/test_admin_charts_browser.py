"""The LAT's charts in a real browser (Selenium driving Debian's headless Chromium,
tests/browser.py): staff who may only view LATs open a LAT with 61 days of stored history and
see its three charts, the points where the values put them (computed here from the plot area
and each chart's axis), the gaps, the axis labels and the APY windows. Screenshots of the page
in the admin's light and dark themes are kept as var/admin-lat-charts.png and
var/admin-lat-charts-dark.png."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path

import pytest
from django.contrib.auth.models import Permission, User
from django.urls import reverse
from django.utils import timezone

from metrics import svg
from metrics.models import MetricSnapshot, RatePoint
from tests import factories as f
from tests.adminpages import change_url
from tests.browser import WAIT_SECONDS

VAR = Path(__file__).resolve().parents[2] / "var"
SCREENSHOT = VAR / "admin-lat-charts.png"
SCREENSHOT_DARK = VAR / "admin-lat-charts-dark.png"
PASSWORD = "viewer-password-for-the-charts-1"
DAYS = 61  # day k = 0..60 ends today
GAP = 30  # the day TVL and the rewards APY were unknown
E18 = 10**18

pytestmark = pytest.mark.django_db(transaction=True)  # the live server's thread reads commits


def at(day: dt.date, hour: int) -> dt.datetime:
    return dt.datetime(day.year, day.month, day.day, hour, tzinfo=dt.UTC)


@pytest.fixture
def lat_with_history():
    """Day k: TVL k ETH (staked half), apy 5 %, nativeApy 2 %, totalApy 7 %, the rate 1 + k/1000;
    on day GAP the TVL, apy and totalApy unknown."""
    today = timezone.now().date()
    first = today - dt.timedelta(days=DAYS - 1)
    lat = f.LatFactory(symbol="chLAT", name="Charted LAT")
    lat.apys = {"current": {"apy": "5", "baseApy": "0", "nativeApy": "2", "totalApy": "7"}}
    lat.save()
    snapshots, points = [], []
    for k in range(DAYS):
        day = first + dt.timedelta(days=k)
        known = k != GAP
        snapshots.append(
            MetricSnapshot(
                lat=lat,
                timestamp=at(day, 0),
                total_assets=1,
                total_supply=1,
                total_tvl_eth=Decimal(k) if known else None,
                staked_tvl_eth=Decimal(k) / 2 if known else None,
                apy=Decimal(5) if known else None,
                native_apy=Decimal(2),
                total_apy=Decimal(7) if known else None,
            )
        )
        points.append(
            RatePoint(
                lat=lat,
                hour=at(day, 23),
                block_number=k,
                total_assets=E18 + k * 10**15,
                total_supply=E18,
            )
        )
    MetricSnapshot.objects.bulk_create(snapshots)
    RatePoint.objects.bulk_create(points)
    return lat, first


def pixel(k: int, value: float, *, low: float, high: float) -> tuple[float, float]:
    """Day k of 0..60 across the plot, `value` from its bottom (low) to its top (high)."""
    return (
        svg.PLOT_LEFT + k / (DAYS - 1) * (svg.PLOT_RIGHT - svg.PLOT_LEFT),
        svg.PLOT_BOTTOM - (value - low) / (high - low) * (svg.PLOT_BOTTOM - svg.PLOT_TOP),
    )


def polylines(driver, chart: str, series: str) -> list[list[tuple[float, float]]]:
    found = driver.find_elements(
        "css selector", f"svg[data-chart='{chart}'] g[data-series='{series}'] polyline"
    )
    return [
        [tuple(map(float, pair.split(","))) for pair in line.get_attribute("points").split()]
        for line in found
    ]


def texts(driver, selector: str) -> list[str]:
    return [e.text for e in driver.find_elements("css selector", selector)]


def assert_line(points, expected) -> None:
    assert len(points) == len(expected)
    for got, want in zip(points, expected, strict=True):
        assert got == pytest.approx(want, abs=0.051)


def _log_in(driver, base: str, username: str) -> None:
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(f"{base}{reverse('admin:login')}?next=/admin/")
    driver.find_element("name", "username").send_keys(username)
    driver.find_element("name", "password").send_keys(PASSWORD)
    page = driver.find_element("tag name", "html")
    driver.find_element("css selector", "input[type=submit]").click()
    WebDriverWait(driver, WAIT_SECONDS).until(ec.staleness_of(page))
    assert driver.current_url == f"{base}/admin/", driver.page_source[:500]


def test_lat_page_shows_the_charts(browser, live_server, lat_with_history):
    lat, first = lat_with_history
    viewer = User.objects.create_user("lat-viewer", password=PASSWORD, is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_lat"))
    _log_in(browser, live_server.url, viewer.username)
    browser.get(live_server.url + change_url(lat))
    assert not texts(browser, ".lat-chart-empty")
    svgs = browser.find_elements("css selector", "svg.lat-chart")
    assert [s.get_attribute("data-chart") for s in svgs] == ["tvl", "apy", "rate"]
    last = first + dt.timedelta(days=DAYS - 1)
    assert svgs[0].find_element("tag name", "title").get_attribute("textContent") == (
        f"TVL in ETH, one point a day (UTC), {first} to {last}"
    )

    # TVL: 0 to 60 ETH (a quarter of 60 is 15, rounded up to 20); day GAP a gap.
    def tvl(k: int, value: float) -> tuple[float, float]:
        return pixel(k, value, low=0, high=60)

    assert texts(browser, "svg[data-chart='tvl'] .chart-y-label") == ["0", "20", "40", "60"]
    total = polylines(browser, "tvl", "total")
    assert [len(line) for line in total] == [GAP, DAYS - GAP - 1]
    assert_line(total[0], [tvl(k, k) for k in range(GAP)])
    assert_line(total[1], [tvl(k, k) for k in range(GAP + 1, DAYS)])
    staked = polylines(browser, "tvl", "staked")
    assert_line(staked[1], [tvl(k, k / 2) for k in range(GAP + 1, DAYS)])
    # Dates under the axis: every 14 days from the first (61 days need 5 labels at most 7).
    dates = texts(browser, "svg[data-chart='tvl'] .chart-x-label")
    assert dates == [(first + dt.timedelta(days=n)).isoformat() for n in range(0, DAYS, 14)]

    # APY: 0 to 8 % (a quarter of 7 is 1.75, rounded up to 2); nativeApy known every day.
    def apy(k: int, value: float) -> tuple[float, float]:
        return pixel(k, value, low=0, high=8)

    assert texts(browser, "svg[data-chart='apy'] .chart-y-label") == ["0", "2", "4", "6", "8"]
    assert_line(polylines(browser, "apy", "nativeApy")[0], [apy(k, 2) for k in range(DAYS)])
    rewards = polylines(browser, "apy", "apy")
    assert [len(line) for line in rewards] == [GAP, DAYS - GAP - 1]
    assert_line(rewards[1], [apy(k, 5) for k in range(GAP + 1, DAYS)])
    assert_line(polylines(browser, "apy", "totalApy")[0], [apy(k, 7) for k in range(GAP)])
    windows = browser.find_elements("css selector", ".lat-apy-windows tbody tr")
    assert windows[0].text.split() == ["current", "5.00", "2.00", "7.00"]

    # The rate: 1 to 1.06, not from 0 (a quarter of 0.06 is 0.015, rounded up to 0.02).
    def rate(k: int, value: float) -> tuple[float, float]:
        return pixel(k, value, low=1, high=1.06)

    assert texts(browser, "svg[data-chart='rate'] .chart-y-label") == [
        "1.00",
        "1.02",
        "1.04",
        "1.06",
    ]
    assert_line(polylines(browser, "rate", "rate")[0], [rate(k, 1 + k / 1000) for k in range(DAYS)])
    assert texts(browser, "svg[data-chart='rate'] .chart-axis-title") == ["ETH per chLAT"]
    caption = browser.find_element("css selector", "#lat-chart-rate-figure figcaption").text
    assert caption.endswith(f"{last}: rate 1.06")

    VAR.mkdir(exist_ok=True)
    assert browser.save_screenshot(str(SCREENSHOT))
    assert SCREENSHOT.read_bytes().startswith(b"\x89PNG")
    # The admin's dark theme (its toggle keeps the choice in localStorage).
    browser.execute_script("localStorage.setItem('theme', 'dark')")
    browser.refresh()
    assert browser.find_element("tag name", "html").get_attribute("data-theme") == "dark"
    assert browser.save_screenshot(str(SCREENSHOT_DARK))
