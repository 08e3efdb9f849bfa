"""chain.gateway.read_ahead: the next item is produced while the consumer handles one,
never more than `depth` ahead, errors arrive at their place, and an early stop stops it."""

from __future__ import annotations

import threading
import time

import pytest

from chain.errors import ChainUnavailable
from chain.gateway import read_ahead, read_ahead_gathered


class Source:
    """Items 0..n-1, recording what was produced and in which thread; raises at `fail_at`."""

    def __init__(self, n: int, fail_at: int | None = None):
        self.n, self.fail_at, self.produced, self.threads = n, fail_at, [], set()

    def __iter__(self):
        for i in range(self.n):
            if i == self.fail_at:
                raise ChainUnavailable("the node could not be reached (test)")
            self.produced.append(i)
            self.threads.add(threading.get_ident())
            yield i


def settle(source: Source, count: int) -> None:
    """Wait until the producer has made `count` items (or a second passes)."""
    deadline = time.monotonic() + 1
    while len(source.produced) < count and time.monotonic() < deadline:
        time.sleep(0.005)
    time.sleep(0.05)  # and a little more, for any item it should not make


@pytest.mark.parametrize("depth", [1, 3])
def test_items_in_order_made_at_most_depth_ahead(depth):
    source = Source(10)
    taken = []
    for item in read_ahead(iter(source), depth=depth):
        settle(source, min(item + 1 + depth, 10))
        # While the consumer holds `item`, the producer has made at most `depth` more.
        assert len(source.produced) == min(item + 1 + depth, 10)
        taken.append(item)
    assert taken == list(range(10))
    assert threading.get_ident() not in source.threads


def test_error_raised_at_its_place():
    source = Source(10, fail_at=4)
    items = read_ahead(iter(source))
    assert [next(items) for _ in range(4)] == [0, 1, 2, 3]
    with pytest.raises(ChainUnavailable):
        next(items)


def test_early_stop_stops_the_producer():
    source = Source(100)
    items = read_ahead(iter(source))
    assert next(items) == 0
    items.close()
    settle(source, 2)
    produced = len(source.produced)
    time.sleep(0.3)
    assert len(source.produced) == produced <= 2


class GatedSource(Source):
    """Source whose items after the first wait until `gate` is set: the first list a consumer
    takes is [0], and the test decides when the rest may be made."""

    def __init__(self, n: int, fail_at: int | None = None):
        super().__init__(n, fail_at)
        self.gate = threading.Event()

    def __iter__(self):
        for i in super().__iter__():
            if i > 0:
                assert self.gate.wait(10)
            yield i


def after_the_first(source: GatedSource, made: int, **gather) -> list[list[int]]:
    """The lists read_ahead_gathered hands over: [0], then, once the producer has made `made`
    items, the rest."""
    batches = read_ahead_gathered(iter(source), **gather)
    try:
        taken = [next(batches)]
        source.gate.set()
        settle(source, made)
        taken += list(batches)
    finally:
        batches.close()
    return taken


def test_gathered_hands_over_what_is_ready_within_the_limit():
    source = GatedSource(12)
    # Items weigh their value; the limit is 10: 1 to 4 together (10), then 5 and 6 alone
    # (5 + 6 passes 10), ... each list's first item is taken whatever it weighs.
    batches = after_the_first(source, 12, depth=12, weight=lambda i: i, limit=10)
    assert batches == [[0], [1, 2, 3, 4], *([i] for i in range(5, 12))]


def test_gathered_never_waits_for_an_item_not_yet_made():
    source = Source(10)
    batches = read_ahead_gathered(iter(source), depth=1, limit=100)
    # With one item read ahead at most, each list is the one item made.
    assert list(batches) == [[i] for i in range(10)]


def test_gathered_error_after_the_items_before_it():
    source = GatedSource(10, fail_at=4)
    batches = read_ahead_gathered(iter(source), depth=10, limit=100)
    assert next(batches) == [0]
    source.gate.set()
    settle(source, 4)
    assert next(batches) == [1, 2, 3]
    with pytest.raises(ChainUnavailable):
        next(batches)


def test_gathered_reads_ahead_at_most_the_weight_given():
    """With `ahead`, the producer stops while what it made and the consumer has not taken
    weighs that much, however many items `depth` allows."""
    source = GatedSource(10)
    batches = read_ahead_gathered(iter(source), depth=10, weight=lambda i: 2, limit=100, ahead=5)
    try:
        assert next(batches) == [0]
        source.gate.set()
        settle(source, 4)
        assert len(source.produced) == 4  # 1, 2 and 3 weigh 6, past 5: no fifth
        assert next(batches) == [1, 2, 3]
        settle(source, 7)
        assert len(source.produced) == 7
        assert [i for batch in batches for i in batch] == list(range(4, 10))
    finally:
        batches.close()
