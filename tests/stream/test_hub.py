"""The hub's keep-alive round (stream/hub.py): one timer for the process hands every stream its
keep-alive once per STREAM_KEEPALIVE_SECONDS (extensions.md, "Live stream": a comment line every
15 s keeps idle connections open). Run on a clock of the test's own: the hub's sleeps advance
it, so the times are exact and nothing waits."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from stream.feed import Message
from stream.hub import KEEPALIVE, SLICE_SECONDS, Hub, Stream
from webhooks.outbox import Filters

INTERVAL = 15.0


class _Stop(Exception):
    pass


def keep_alives(hub: Hub, taken: list[Stream], until: float, monkeypatch) -> list[list[float]]:
    """The hub's keep-alive timer from 0 to `until` s of the fake clock. The streams `taken`
    have their queues emptied after every turn, as their pumps would send them: for each, the
    times it was handed a keep-alive."""
    clock, got = [0.0], [[] for _ in taken]

    async def sleep(seconds: float) -> None:
        for times, stream in zip(got, taken, strict=True):
            while not stream.queue.empty():
                if stream.queue.get_nowait() is KEEPALIVE:
                    times.append(clock[0])
        if clock[0] + seconds > until:
            raise _Stop
        clock[0] += seconds

    async def run() -> None:
        monkeypatch.setattr(asyncio.get_running_loop(), "time", lambda: clock[0])
        monkeypatch.setattr(asyncio, "sleep", sleep)
        with pytest.raises(_Stop):
            await hub._keep_alive()

    asyncio.run(run())
    return got


def test_every_idle_stream_gets_a_keep_alive_each_interval(settings, monkeypatch):
    settings.STREAM_KEEPALIVE_SECONDS = INTERVAL
    hub = Hub()
    idle = [hub.subscribe(Filters()) for _ in range(25)]
    got = keep_alives(hub, idle, 4 * INTERVAL, monkeypatch)
    for times in got:
        assert 0 < times[0] <= INTERVAL  # the first within the interval of the subscription
        gaps = [later - earlier for earlier, later in itertools.pairwise(times)]
        assert gaps == pytest.approx([INTERVAL] * 3)  # then one every interval, no more
    # The turns spread the streams, one slice every SLICE_SECONDS (300 over 15 s): each of the
    # 25 in a slice of its own, the first keep-alives SLICE_SECONDS apart.
    firsts = sorted(times[0] for times in got)
    gaps = [later - earlier for earlier, later in itertools.pairwise(firsts)]
    assert gaps == pytest.approx([SLICE_SECONDS] * 24)


def test_more_streams_than_slices_share_them_evenly(settings, monkeypatch):
    settings.STREAM_KEEPALIVE_SECONDS = 10 * SLICE_SECONDS  # ten slices
    hub = Hub()
    idle = [hub.subscribe(Filters()) for _ in range(25)]
    got = keep_alives(hub, idle, 2 * settings.STREAM_KEEPALIVE_SECONDS, monkeypatch)
    # 25 streams over 10 turns: 2 or 3 at each, never more at once.
    firsts = [times[0] for times in got]
    assert len(set(firsts)) == 10
    assert max(firsts.count(t) for t in firsts) == 3


def test_a_stream_with_messages_waiting_or_gone_gets_no_keep_alive(settings, monkeypatch):
    settings.STREAM_KEEPALIVE_SECONDS = INTERVAL
    hub = Hub()
    idle, busy, gone = (hub.subscribe(Filters()) for _ in range(3))
    hub.unsubscribe(gone)
    waiting = Message(7, "deposit", None, frozenset(), None, b"id: 7\n\n")
    busy.queue.put_nowait(waiting)  # never sent here: its pump is writing meanwhile
    (times,) = keep_alives(hub, [idle], 2 * INTERVAL, monkeypatch)
    assert len(times) == 2
    assert busy.queue.get_nowait() == waiting
    assert busy.queue.empty()
    assert gone.queue.empty()
