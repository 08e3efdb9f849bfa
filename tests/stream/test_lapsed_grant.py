"""A connect whose grant lapsed before the stream process took it (a process stalled longer
than STREAM_GRANT_SECONDS between the answer and its start): the client gets the JSON error
body, never the internal grant header. The stall cannot be made for real in a test, so Django's
answer naming a grant that is gone stands in for it."""

from __future__ import annotations

import asyncio
import json

import pytest

from stream import asgi
from stream.grants import GRANT_HEADER

pytestmark = pytest.mark.django_db


def test_a_lapsed_grant_is_the_error_body_without_the_grant(monkeypatch):
    async def ready() -> None:
        return None

    monkeypatch.setattr(asgi, "hub", lambda: type("Hub", (), {"ready": staticmethod(ready)}))

    async def django(scope, receive, send):
        headers = [
            (b"content-type", b"text/event-stream; charset=utf-8"),
            (GRANT_HEADER.lower().encode(), b"a-grant-that-lapsed"),
            (b"x-request-id", b"req-1"),
            (b"content-length", b"0"),
        ]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": b""})

    sent: list[dict] = []

    async def send(message: dict) -> None:
        sent.append(message)

    async def receive() -> dict:
        return {"type": "http.disconnect"}

    scope = {"type": "http", "path": asgi.PATH, "method": "GET", "headers": []}
    asyncio.run(asgi.StreamApplication(django)(scope, receive, send))
    start, body = sent
    headers = dict(start["headers"])
    assert start["status"] == 500
    assert GRANT_HEADER.lower().encode() not in headers
    assert headers[b"content-type"] == b"application/json"
    assert headers[b"x-request-id"] == b"req-1"
    assert json.loads(body["body"])["error"]["code"] == "internal_server_error"
    assert int(headers[b"content-length"]) == len(body["body"])
