"""One stream process's fan-out, shared by every stream it serves.

The hub follows the feed (stream/feed.py): woken by the outbox's NOTIFY (PostgreSQL LISTEN on a
connection of its own) or every STREAM_POLL_SECONDS, it reads the rows after the last it saw,
once for the process, and puts each message in the queue of every stream whose filters match.
A stream's queue holds at most STREAM_BUFFER messages: a stream that cannot take one more falls
behind, is handed nothing more, and catches up from the stored feed (stream/asgi.py). Nothing
here uses Redis: with Redis down the streams go on.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import psycopg
from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import close_old_connections, connection

from core.db import listener_conninfo
from stream.feed import Filters, Message, feed_after, feed_high, selected
from stream.slots import slots_renew
from webhooks.outbox import NOTIFY_CHANNEL

logger = logging.getLogger(__name__)


def in_thread(function: Callable[..., Any]) -> Callable[..., Any]:
    """`function` (ORM work) run in a worker thread, its connection checked before and closed
    after an error, so that a database restart costs one failed read."""

    def run(*args: Any, **kwargs: Any) -> Any:
        close_old_connections()
        try:
            return function(*args, **kwargs)
        except Exception:
            connection.close()
            raise

    return sync_to_async(run, thread_sensitive=False)


class Stream:
    """One open stream: its filters and the messages waiting for it."""

    def __init__(self, filters: Filters, buffer: int) -> None:
        self.filters = filters
        self.queue: asyncio.Queue[Message] = asyncio.Queue(buffer)
        self.behind = False  # the queue overflowed: the rest comes from the stored feed

    def offer(self, message: Message) -> None:
        if self.behind:
            return
        try:
            self.queue.put_nowait(message)
        except asyncio.QueueFull:
            self.behind = True


class Hub:
    def __init__(self) -> None:
        self.high = 0  # the last id read from the feed
        self._streams: set[Stream] = set()
        self._started: asyncio.Future | None = None
        self._wake = asyncio.Event()
        self._tasks: list[asyncio.Task] = []

    async def ready(self) -> None:
        """Started (once per process): the feed's newest id known, following it."""
        if self._started is None or (self._started.done() and self._started.exception()):
            self._started = asyncio.ensure_future(self._start())  # first, or after a failure
        await asyncio.shield(self._started)

    async def _start(self) -> None:
        self.high = await in_thread(feed_high)()
        self._tasks = [
            asyncio.create_task(self._follow()),
            asyncio.create_task(self._listen()),
            asyncio.create_task(self._renew()),
        ]

    def subscribe(self, filters: Filters) -> Stream:
        """A stream handed every message after `self.high` (the caller has sent those up to
        it, with no await since it read it)."""
        stream = Stream(filters, settings.STREAM_BUFFER)
        self._streams.add(stream)
        return stream

    def unsubscribe(self, stream: Stream) -> None:
        self._streams.discard(stream)

    async def _follow(self) -> None:
        while True:
            try:
                await asyncio.wait_for(self._wake.wait(), settings.STREAM_POLL_SECONDS)
            except TimeoutError:
                pass
            self._wake.clear()
            try:
                more = True
                while more:
                    messages, last, more = await in_thread(feed_after)(self.high)
                    self._publish(messages)
                    self.high = last
            except Exception:
                logger.exception("stream: the feed could not be read")
                await asyncio.sleep(1)

    def _publish(self, messages: list[Message]) -> None:
        for message in messages:
            for stream in self._streams:
                if selected(stream.filters, message):
                    stream.offer(message)
        for stream in [stream for stream in self._streams if stream.behind]:
            self.unsubscribe(stream)

    async def _renew(self) -> None:
        """The process's per-address slots renewed together (stream/slots.py)."""
        while True:
            await asyncio.sleep(settings.STREAM_KEEPALIVE_SECONDS)
            try:
                await in_thread(slots_renew)()
            except Exception:
                logger.exception("stream: the slots could not be renewed")

    async def _listen(self) -> None:
        """Wake the follower on every NOTIFY of the outbox (PostgreSQL; elsewhere it polls)."""
        if connection.vendor != "postgresql":
            return
        conninfo = listener_conninfo()
        while True:
            try:
                async with await psycopg.AsyncConnection.connect(
                    conninfo, autocommit=True
                ) as listener:
                    await listener.execute(f"LISTEN {NOTIFY_CHANNEL}")
                    self._wake.set()  # what committed while no one listened
                    async for _ in listener.notifies():
                        self._wake.set()
            except (psycopg.Error, OSError):
                logger.warning("stream: LISTEN lost, polling until it is back")
                await asyncio.sleep(1)


_hubs: dict[asyncio.AbstractEventLoop, Hub] = {}


def hub() -> Hub:
    """This event loop's hub (a stream process has one loop)."""
    loop = asyncio.get_running_loop()
    if loop not in _hubs:
        _hubs[loop] = Hub()
    return _hubs[loop]
