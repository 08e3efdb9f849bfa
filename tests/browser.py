"""Headless Chromium driven by Selenium (Debian's `chromium` and `chromium-driver`; .ci/run
installs them), as a pytest plugin of tests/conftest.py: the `browser` fixture, a fresh profile
per test. Without the browser the test is skipped, except in CI (CI set), where it fails."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
WAIT_SECONDS = 20


def _browser_missing() -> str | None:
    missing = [path for path in (CHROMIUM, CHROMEDRIVER) if not os.access(path, os.X_OK)]
    if not missing:
        return None
    return f"not installed: {', '.join(missing)} (apt-get install chromium chromium-driver)"


@pytest.fixture
def browser(tmp_path) -> Iterator:
    missing = _browser_missing()
    if missing and os.environ.get("CI"):
        pytest.fail(f"CI needs the browser test's {missing}")
    if missing:
        pytest.skip(missing)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--window-size=1280,1600",
        f"--user-data-dir={tmp_path / 'chromium-profile'}",
    ):
        options.add_argument(arg)
    driver = webdriver.Chrome(options=options, service=Service(executable_path=CHROMEDRIVER))
    driver.set_page_load_timeout(WAIT_SECONDS)
    try:
        yield driver
    finally:
        driver.quit()
