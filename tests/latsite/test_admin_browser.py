"""The admin in a real browser (Selenium driving Debian's headless Chromium): a curator logs in
through the login form, edits an AVS's website, and the API shows the new value; the same
curator cannot open the API keys; the AVS's history names the curator. A screenshot of the
edited page is kept as var/admin-curator-edit.png. The browser: tests/browser.py."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from django.urls import reverse

from tests.adminpages import change_url
from tests.browser import WAIT_SECONDS

SCREENSHOT = Path(__file__).resolve().parents[2] / "var" / "admin-curator-edit.png"
PASSWORD = "curator-password-for-the-browser-1"
NEW_WEBSITE = "https://curated.example/avs"

pytestmark = pytest.mark.django_db(transaction=True)  # the live server's thread reads commits


def _submit(driver, locator) -> None:
    """Click and wait for the next page (the old one's <html> goes stale)."""
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    page = driver.find_element("tag name", "html")
    driver.find_element(*locator).click()
    WebDriverWait(driver, WAIT_SECONDS).until(ec.staleness_of(page))


def _log_in(driver, base: str, username: str) -> None:
    driver.get(f"{base}{reverse('admin:login')}?next=/admin/")
    driver.find_element("name", "username").send_keys(username)
    driver.find_element("name", "password").send_keys(PASSWORD)
    _submit(driver, ("css selector", "input[type=submit]"))
    assert driver.current_url == f"{base}/admin/", driver.page_source[:500]


def _api_lat(base: str, proxy: str) -> dict:
    with urllib.request.urlopen(f"{base}/lat/{proxy}?withCuratedMetadata=true", timeout=10) as r:
        assert r.status == 200
        return json.load(r)


def _status(url: str, *, session: str) -> int:
    """The HTTP status of a GET in the browser's session (Selenium does not tell it)."""
    request = urllib.request.Request(url, headers={"Cookie": f"sessionid={session}"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


def test_curator_edits_the_website_in_a_browser(browser, live_server, world, staff_member):
    curator = staff_member("carla", "curators", password=PASSWORD)
    base, avs, proxy = live_server.url, world.avs, world.eth_lat.proxy_address
    assert world.eth_lat.avs_id == avs.pk
    before = _api_lat(base, proxy)["curatedMetadata"]["metadataWebsite"]
    assert before == "https://avs.example"  # read once: the cached document holds the old value

    _log_in(browser, base, curator.username)
    browser.get(base + change_url(avs))
    field = browser.find_element("name", "metadata_website")
    field.clear()
    field.send_keys(NEW_WEBSITE)
    _submit(browser, ("name", "_continue"))  # "Save and continue editing": the edited page
    assert "was changed successfully" in browser.page_source
    assert browser.find_element("name", "metadata_website").get_attribute("value") == NEW_WEBSITE
    SCREENSHOT.parent.mkdir(exist_ok=True)
    assert browser.save_screenshot(str(SCREENSHOT))
    assert SCREENSHOT.read_bytes().startswith(b"\x89PNG")

    assert _api_lat(base, proxy)["curatedMetadata"]["metadataWebsite"] == NEW_WEBSITE

    keys = reverse("admin:rest_framework_api_key_apikey_changelist")
    browser.get(base + keys)
    body = json.loads(browser.find_element("tag name", "pre").text)
    assert body["error"]["code"] == "forbidden"
    assert _status(base + keys, session=browser.get_cookie("sessionid")["value"]) == 403

    browser.get(base + reverse("admin:lats_avs_history", args=[avs.pk]))
    rows = browser.find_elements("css selector", "#change-history tbody tr")
    latest = rows[0].text
    assert curator.username in latest, latest
    assert NEW_WEBSITE in browser.page_source
