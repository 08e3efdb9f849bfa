"""The stream process's ASGI application (the Procfile's `stream`; latsite/asgi.py): Django for
every request, and for `GET /stream/events` the stream itself once Django granted it.

The connect is an ordinary Django request (stream/api/views.py), so the API key, the rate limit,
CORS, the request id, the error body and the metrics are those of every endpoint. Its answer,
if it grants the stream, is held back here: its headers open the stream, and this module keeps
the connection, not a Django thread, for as long as the client stays (a Django request would
hold a thread per open stream). Each stream sends, in id order:
0. if retention deleted messages after the client's cursor, one `reset` message instead, and
   the response ends (stream/feed.py: never a gap);
1. the stored feed after the client's cursor up to the hub's last id (the backlog, read in
   pages, each read checked against retention as 0.), until it has caught up with the hub;
2. then what the hub hands it (everything after that id), skipping ids already sent; and
   back to 1 whenever the hub outran its queue (a burst larger than STREAM_BUFFER);
and a keep-alive comment when the hub hands it one (stream/hub.py: once per
STREAM_KEEPALIVE_SECONDS, one timer for every stream, none per stream). A client that
leaves one message unread for STREAM_SEND_TIMEOUT is disconnected: what the process holds for
a stream is its queue (references to messages every stream shares) and the socket's buffer.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from django.conf import settings

from core.api.errors import error_body
from stream import telemetry
from stream.feed import FeedExpired, feed_backlog, feed_expired, reset_frame
from stream.grants import GRANT_HEADER, SCOPE_KEY, UNAVAILABLE, Grant, grant_take
from stream.hub import KEEPALIVE, Hub, Stream, hub, in_thread
from stream.slots import slot_release

logger = logging.getLogger(__name__)

PATH = "/stream/events"
_GRANT = GRANT_HEADER.lower().encode()
_HELLO = b"retry: 3000\n: connected\n\n"

Send = Callable[[dict[str, Any]], Awaitable[None]]


class StreamApplication:
    def __init__(self, django: Any) -> None:
        self.django = django

    async def __call__(self, scope: dict, receive: Callable, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != PATH:
            await self.django(scope, receive, send)
            return
        try:
            await hub().ready()
            ready: Any = True
        except Exception:
            logger.exception("stream: the event feed could not be read")
            ready = UNAVAILABLE
        answer: list[dict[str, Any]] = []

        async def held(message: dict[str, Any]) -> None:
            answer.append(message)

        await self.django({**scope, SCOPE_KEY: ready}, receive, held)
        start, grant, named = _granted(answer[0]) if answer else ({}, None, False)
        if grant is not None:
            await _serve(grant, start, receive, send)
        elif named:  # granted, but the grant lapsed before it was taken (a stalled process)
            await _lapsed(start, send)
        else:
            for message in answer:
                await send(message)


def _granted(start: dict[str, Any]) -> tuple[dict[str, Any], Grant | None, bool]:
    """The response's start without the grant header (and the empty body's length), the grant
    it names (None where none, or one that lapsed), and whether it named one."""
    headers, grant, named = [], None, False
    for name, value in start.get("headers", []):
        if name.lower() == _GRANT:
            grant, named = grant_take(value.decode()), True
        elif name.lower() != b"content-length":
            headers.append((name, value))
    return {**start, "headers": headers}, grant, named


async def _lapsed(start: dict[str, Any], send: Send) -> None:
    """The error body in place of a stream whose grant lapsed: the client reconnects."""
    body = json.dumps(
        error_body(
            "internal_server_error",
            "The stream could not be opened in time; reconnect (with Last-Event-ID to resume).",
        )
    ).encode()
    headers = [
        (name, value)
        for name, value in start["headers"]
        if name.lower() not in (b"content-type", b"cache-control", b"x-accel-buffering")
    ]
    headers += [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    await send({**start, "status": 500, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _serve(grant: Grant, start: dict[str, Any], receive: Callable, send: Send) -> None:
    """The stream until the client goes, its pump ends, or its API key is no longer in force
    (stream/hub.py checks them): then its response ends and its slot is released."""
    feed, key, ended = hub(), grant.key, None
    pump = asyncio.create_task(_pump(grant, start, send))
    gone = asyncio.create_task(_disconnected(receive))
    tasks: list[asyncio.Task[Any]] = [pump, gone]
    if key is not None:
        ended = feed.hold_key(key)
        tasks.append(asyncio.create_task(ended.wait()))
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        for result in await asyncio.gather(*tasks, return_exceptions=True):
            if isinstance(result, Exception):
                logger.error("stream: sending failed", exc_info=result)
        if key is not None and ended is not None:
            feed.release_key(key, ended)
        await in_thread(slot_release)(grant.slot)
    if ended is not None and ended.is_set() and not gone.done():
        await _end(send)


async def _end(send: Send) -> None:
    """The end of a stream's response the server chose (the client is still there)."""
    try:
        await _send(send, {"type": "http.response.body", "body": b"", "more_body": False})
    except (OSError, RuntimeError, TimeoutError):  # gone meanwhile, or never started
        logger.info("stream: a stream could not be ended cleanly; its connection closes")


async def _pump(grant: Grant, start: dict[str, Any], send: Send) -> None:
    """The stream's messages: the stored feed after the cursor up to where the hub stands, then
    the hub's; from the stored feed again whenever the hub outran the stream's queue. Ends when
    one send waits longer than STREAM_SEND_TIMEOUT (a client reading too slowly)."""
    feed = hub()
    telemetry.OPEN.inc()
    try:
        await _send(send, start)
        await _body(send, _HELLO)
        last = grant.cursor if grant.cursor is not None else feed.high
        if grant.cursor is not None and (expired := await in_thread(feed_expired)(last)):
            raise expired
        while True:
            last = await _catch_up(feed, grant, send, last)
            # No await since _catch_up saw feed.high: the hub hands on what follows `last`.
            stream = feed.subscribe(grant.filters)
            try:
                last = await _live(stream, send, last)
            finally:
                feed.unsubscribe(stream)
            telemetry.CATCH_UPS.inc()
    except FeedExpired as expired:
        await _body(send, reset_frame(expired))
        await _send(send, {"type": "http.response.body", "body": b"", "more_body": False})
    except TimeoutError:
        telemetry.DROPPED.inc()
        logger.warning("stream: a client reading too slowly was disconnected")
    finally:
        telemetry.OPEN.dec()


async def _catch_up(feed: Hub, grant: Grant, send: Send, last: int) -> int:
    """Send the stored feed after `last` until it reaches the hub's last id; returns it.
    FeedExpired when retention deleted what follows `last`."""
    while last < (upto := feed.high):
        messages, read, more = await in_thread(feed_backlog)(
            last, upto=upto, filters=grant.filters, limit=settings.STREAM_BACKLOG_PAGE
        )
        for message in messages:
            await _body(send, message.frame)
        telemetry.MESSAGES.inc(len(messages))
        last = read if more else upto
    return last


async def _live(stream: Stream, send: Send, last: int) -> int:
    """The hub's messages (and keep-alives) until the stream fell behind (its queue overflowed)
    and its queue is sent; returns the last id sent."""
    while not (stream.behind and stream.queue.empty()):
        message = await stream.queue.get()
        if message is KEEPALIVE:
            await _body(send, message.frame)
        elif message.id > last:
            await _body(send, message.frame)
            telemetry.MESSAGES.inc()
            last = message.id
    return last


async def _send(send: Send, message: dict[str, Any]) -> None:
    async with asyncio.timeout(settings.STREAM_SEND_TIMEOUT):
        await send(message)


async def _body(send: Send, data: bytes) -> None:
    await _send(send, {"type": "http.response.body", "body": data, "more_body": True})


async def _disconnected(receive: Callable) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
