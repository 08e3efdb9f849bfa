"""The Procfile's web process answers gunicorn's own errors (a request it refuses before Django
sees it) in the API's JSON error body: a request line over the limit is a 414 `bad_request`."""

from __future__ import annotations

import http.client
import json
import shlex
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.ports import closed_port

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def web() -> str:
    """The Procfile's `web` line as it is, on a free port, one worker."""
    line = next(
        line.split(":", 1)[1]
        for line in (REPO / "Procfile").read_text().splitlines()
        if line.startswith("web:")
    )
    port = closed_port()
    line = line.replace("${PORT:-8000}", str(port)).replace("${WEB_CONCURRENCY:-4}", "1")
    command = shlex.split(line)
    command[0] = str(Path(sys.executable).with_name(command[0]))  # the venv's gunicorn
    process = subprocess.Popen(command, cwd=REPO, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        else:
            pytest.fail("the web process did not listen")
        yield f"127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(10)


def get(web: str, path: str) -> tuple[int, str, dict]:
    connection = http.client.HTTPConnection(web, timeout=10)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, response.getheader("Content-Type"), json.loads(response.read())
    finally:
        connection.close()


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
