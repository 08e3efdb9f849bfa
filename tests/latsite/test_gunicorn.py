"""The Procfile's web process answers gunicorn's own errors (a request it refuses before Django
sees it) in the API's JSON error body, with an X-Request-ID as every answer: a request line over
the limit is a 414 `bad_request`, header fields over the limit a 431, a malformed request a
400."""

from __future__ import annotations

import http.client
import json
import re
import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests.processes import REPO, procfile_web, raw_exchange


@pytest.fixture(scope="module")
def web() -> Iterator[str]:
    """The Procfile's `web` line as it is, on a free port, one worker."""
    with procfile_web() as address:
        yield address


def get(web: str, path: str) -> tuple[int, str, dict]:
    connection = http.client.HTTPConnection(web, timeout=10)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, response.getheader("Content-Type"), json.loads(response.read())
    finally:
        connection.close()


def raw_answer(web: str, request: bytes) -> tuple[int, dict[str, str], dict]:
    """The answer to bytes sent as they are: its status, headers (lower-case names), JSON."""
    host, port = web.split(":")
    status, headers, body = raw_exchange(host, int(port), request)
    return status, headers, json.loads(body)


def test_a_uri_too_long_for_gunicorn_is_a_414_in_the_error_body(web):
    status, content_type, body = get(web, "/lat?" + "a=1&" * 3000)  # 12,000 bytes
    assert (status, content_type) == (414, "application/json")
    assert body["error"]["code"] == "bad_request"
    assert body["error"]["doc_url"].endswith("/errors#bad_request")
    assert "4094 bytes at most" in body["error"]["message"]  # gunicorn's default limit


def test_a_uri_within_the_limit_reaches_django(web):
    status, content_type, body = get(web, "/no-such-path?" + "a=1&" * 100)
    assert (status, content_type) == (404, "application/json")
    assert body["error"]["code"] == "not_found"


NEW_REQUEST_ID = re.compile(r"[0-9a-f]{32}")  # core.logs.new_request_id


@pytest.mark.parametrize(
    ("request_bytes", "status"),
    [
        (b"GET /lat?" + b"a=1&" * 3000 + b" HTTP/1.1\r\nHost: x\r\n\r\n", 414),
        (b"GET /lat HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 9000 + b"\r\n\r\n", 431),
        (b"GET /lat HTTP/1.1\r\nHost: x\r\n" + b"X-A: 1\r\n" * 101 + b"\r\n", 431),
        (b"GET /lat HTTP/1.1\r\nHost: x\r\nBad Name: 1\r\n\r\n", 400),
        (b"NOT-HTTP\r\n\r\n", 400),
    ],
    ids=["request-line", "header-field", "header-count", "header-name", "request-line-garbled"],
)
def test_gunicorns_own_refusals_carry_a_new_request_id(web, request_bytes, status):
    """The schema promises X-Request-ID on every answer; gunicorn's refusals make a new one
    (the request was not read, so the caller's is not taken)."""
    seen = set()
    for _ in range(2):
        answered, headers, body = raw_answer(
            web, request_bytes.replace(b"Host: x", b"Host: x\r\nX-Request-ID: mine")
        )
        assert (answered, headers["content-type"]) == (status, "application/json")
        assert body["error"]["code"] == "bad_request"
        assert NEW_REQUEST_ID.fullmatch(headers["x-request-id"])
        seen.add(headers["x-request-id"])
    assert len(seen) == 2  # a new id per answer


def test_loading_the_application_freezes_what_is_alive():
    """latsite/wsgi.py, as a worker imports it: the URLconf's views imported, and every object
    then alive out of the collector's walks (not in its oldest generation, which a full
    collection walks)."""
    script = (
        "import gc, json, sys\n"
        "import latsite.wsgi\n"
        "print(json.dumps([gc.get_freeze_count(), len(gc.get_objects(generation=2)),"
        " 'catalog.api.views' in sys.modules]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    frozen, oldest, views = json.loads(done.stdout.splitlines()[-1])
    assert views
    assert frozen > 50_000  # Django, DRF, web3: their modules, classes and functions
    assert oldest < frozen / 100
