"""The test live server (pytest-django's `live_server`, which schemathesis runs against) answers
every path with the application: Django's test server serves MEDIA_ROOT at MEDIA_URL before the
application, and with both unset it served the working directory's files at every path, and
answered a path too long for a file name with a plain-text 500 without X-Request-ID (schemathesis
found it with `DELETE /webhooks/{id}` and a long percent-encoded id)."""

from __future__ import annotations

import re

import pytest
from rest_framework_api_key.models import APIKey

from tests.processes import raw_exchange

pytestmark = pytest.mark.django_db(transaction=True)

REQUEST_ID = re.compile(r"[0-9a-f]{32}")  # core.logs.new_request_id


def answer(live_server, request: bytes) -> tuple[int, dict[str, str], bytes]:
    """Bytes sent as they are: the status, the headers (lower-case names), the body."""
    host, port = live_server.url.removeprefix("http://").split(":")
    return raw_exchange(host, int(port), request)


@pytest.mark.parametrize("repeat", [1, 50])
def test_a_long_garbage_webhook_id_is_a_json_404_with_a_request_id(live_server, repeat):
    key = APIKey.objects.create_key(name="fuzz")[1]
    path = "/webhooks/" + "%0D%0B%FF%FE" * repeat  # 50: longer than a file name may be
    request = (
        f"DELETE {path} HTTP/1.1\r\nHost: localhost\r\nX-API-Token: {key}\r\n"
        "Content-Length: 0\r\n&&iyC;: 1\r\nk*: 6s,: 2\r\nConnection: close\r\n\r\n"
    ).encode()
    status, headers, body = answer(live_server, request)
    assert (status, headers["content-type"]) == (404, "application/json")
    assert b'"code":"not_found"' in body.replace(b" ", b"")
    assert REQUEST_ID.fullmatch(headers["x-request-id"])


def test_the_working_directorys_files_are_not_served(live_server):
    request = b"GET /README.md HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    status, headers, body = answer(live_server, request)
    assert (status, headers["content-type"]) == (404, "application/json")
    assert b"LAT service" not in body
    assert REQUEST_ID.fullmatch(headers["x-request-id"])
