"""One stream process's fan-out, shared by every stream it serves.

The hub follows the feed (stream/feed.py): woken by the outbox's NOTIFY (PostgreSQL LISTEN on a
connection of its own), it reads the rows after the last it saw, once for the process, and puts
each message in the queue of every stream whose filters match. Without LISTEN (SQLite, or while
its connection is lost) it reads every STREAM_POLL_SECONDS; with it, every LISTENING_POLL_SECONDS
only, a safety net (every writer of the outbox NOTIFYs at its commit, webhooks/outbox.py).
A stream's queue holds at most STREAM_BUFFER messages: a stream that cannot take one more falls
behind, is handed nothing more, and catches up from the stored feed (stream/asgi.py). Nothing
here uses Redis: with Redis down the streams go on.

Idle streams cost next to nothing: no timer and no task per stream wakes while nothing happens.
One timer for the process hands the keep-alive (KEEPALIVE, through the same queue as messages)
to every stream once per STREAM_KEEPALIVE_SECONDS: the streams are spread over slices, one
slice visited every SLICE_SECONDS, so that the writes of a thousand streams come a few at a time
rather than in batches (with ten slices, a hundred writes at once here and a hundred reads at
once at the clients every half second took a core for milliseconds, and the other processes'
slowest answers with it: the `stream` bench's WSGI reads' p99). The per-address slots
(stream/slots.py) are renewed in one Redis call a third of STREAM_SLOT_SECONDS apart, and the
API keys of the open streams checked in one query every STREAM_KEY_CHECK_SECONDS: the streams
of a key disabled, expired or deleted meanwhile are told to end (`hold_key`).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable
from typing import Any

import psycopg
from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import close_old_connections, connection

from core.api.auth import keys_ended
from core.db import listener_conninfo
from stream.feed import Filters, Message, feed_after, feed_high, selected
from stream.slots import slots_renew
from webhooks.outbox import NOTIFY_CHANNEL

logger = logging.getLogger(__name__)

LISTENING_POLL_SECONDS = 30.0  # the feed read while LISTEN is up, whether or not NOTIFY came
SLICE_SECONDS = 0.05  # one slice of the keep-alive round visited this often
# The keep-alive comment (extensions.md, "Live stream"), queued as a message is: it has no id.
KEEPALIVE = Message(0, "", None, frozenset(), None, b": keep-alive\n\n")


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

    def __init__(self, filters: Filters, buffer: int, turn: int) -> None:
        self.filters = filters
        self.queue: asyncio.Queue[Message] = asyncio.Queue(buffer)
        self.behind = False  # the queue overflowed: the rest comes from the stored feed
        self.turn = turn  # its slice of the keep-alive round

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
        # Stream.turn's slices: STREAM_KEEPALIVE_SECONDS / SLICE_SECONDS of them
        self._slices = max(1, round(settings.STREAM_KEEPALIVE_SECONDS / SLICE_SECONDS))
        self._round: list[set[Stream]] = [set() for _ in range(self._slices)]
        self._turns = itertools.count()
        self._started: asyncio.Future | None = None
        self._wake = asyncio.Event()
        self._listening = False  # LISTEN is up: NOTIFY wakes the follower
        self._tasks: list[asyncio.Task] = []
        self._keyed: dict[str, set[asyncio.Event]] = {}  # API key id -> its streams' `ended`

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
            asyncio.create_task(self._keep_alive()),
            asyncio.create_task(self._check_keys()),
        ]

    def subscribe(self, filters: Filters) -> Stream:
        """A stream handed every message after `self.high` (the caller has sent those up to
        it, with no await since it read it)."""
        stream = Stream(filters, settings.STREAM_BUFFER, next(self._turns) % self._slices)
        self._streams.add(stream)
        self._round[stream.turn].add(stream)
        return stream

    def unsubscribe(self, stream: Stream) -> None:
        self._streams.discard(stream)
        self._round[stream.turn].discard(stream)

    def hold_key(self, key: str) -> asyncio.Event:
        """An event of a stream opened with the API key `key`, set once the key is found
        disabled, expired or deleted (`_check_keys`): the stream ends on it."""
        ended = asyncio.Event()
        self._keyed.setdefault(key, set()).add(ended)
        return ended

    def release_key(self, key: str, ended: asyncio.Event) -> None:
        """The stream of `ended` is closed: its key is no longer checked for it."""
        held = self._keyed.get(key)
        if held is not None:
            held.discard(ended)
            if not held:
                del self._keyed[key]

    async def _check_keys(self) -> None:
        """Every STREAM_KEY_CHECK_SECONDS, one query for the keys of every open stream; the
        streams of the keys no longer in force are told to end. While the database cannot be
        read, the streams go on (and the check is tried again)."""
        while True:
            await asyncio.sleep(settings.STREAM_KEY_CHECK_SECONDS)
            if not self._keyed:
                continue
            try:
                ended = await in_thread(keys_ended)(list(self._keyed))
            except Exception:
                logger.exception("stream: the API keys of open streams could not be checked")
                continue
            for key in ended:
                streams = self._keyed.pop(key, set())
                logger.info(
                    "stream: %d stream(s) of an API key no longer in force ended", len(streams)
                )
                for event in streams:
                    event.set()

    async def _follow(self) -> None:
        while True:
            poll = settings.STREAM_POLL_SECONDS
            if self._listening:
                poll = max(poll, LISTENING_POLL_SECONDS)
            try:
                await asyncio.wait_for(self._wake.wait(), poll)
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

    async def _keep_alive(self) -> None:
        """Each stream handed KEEPALIVE once per STREAM_KEEPALIVE_SECONDS, its slice's turn,
        unless messages wait in its queue (they are being sent): no stream goes longer than
        that without a write. The turns are kept to the clock, not to the work they did."""
        loop = asyncio.get_running_loop()
        step, at = settings.STREAM_KEEPALIVE_SECONDS / self._slices, loop.time()
        for turn in itertools.cycle(range(self._slices)):
            at = max(at + step, loop.time())
            await asyncio.sleep(at - loop.time())
            for stream in self._round[turn]:
                if stream.queue.empty():
                    stream.queue.put_nowait(KEEPALIVE)

    async def _renew(self) -> None:
        """The process's per-address slots renewed together (stream/slots.py), three times per
        STREAM_SLOT_SECONDS: a renewal may fail or come late once without a slot lapsing."""
        while True:
            await asyncio.sleep(settings.STREAM_SLOT_SECONDS / 3)
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
                    self._listening = True
                    self._wake.set()  # what committed while no one listened
                    async for _ in listener.notifies():
                        self._wake.set()
            except (psycopg.Error, OSError):
                logger.warning("stream: LISTEN lost, polling until it is back")
            finally:
                if self._listening:
                    self._listening = False
                    self._wake.set()  # the follower reads now, then polls
            await asyncio.sleep(1)


_hubs: dict[asyncio.AbstractEventLoop, Hub] = {}


def hub() -> Hub:
    """This event loop's hub (a stream process has one loop)."""
    loop = asyncio.get_running_loop()
    if loop not in _hubs:
        _hubs[loop] = Hub()
    return _hubs[loop]
