"""The per-address slots in Redis (stream/slots.py): the process renews the slots its streams
hold, a script call per batch, and only those (the test environment's Redis)."""

from __future__ import annotations

import time
import uuid

import pytest
from django.core.cache import cache
from django_redis import get_redis_connection

from stream import slots
from stream.slots import slot_acquire, slot_hold, slot_release, slots_renew


@pytest.fixture
def addresses():
    """Two client addresses of this test's own; their sets deleted after it."""
    made = [f"198.51.100.{n}-{uuid.uuid4().hex[:8]}" for n in (7, 8)]
    yield made
    redis = get_redis_connection("default")
    redis.delete(*(cache.make_key(f"stream:open:{ident}") for ident in made))


@pytest.mark.parametrize("batch", [500, 2])
def test_renewal_extends_every_held_slot_and_only_those(settings, monkeypatch, addresses, batch):
    settings.STREAM_SLOT_SECONDS = 60
    monkeypatch.setattr(slots, "RENEW_BATCH", batch)  # 2: the three held slots in two calls
    redis = get_redis_connection("default")
    first, second = addresses
    held = [slot_acquire(first), slot_acquire(first), slot_acquire(second)]
    for slot in held:
        slot_hold(slot)
    released, pending = slot_acquire(first), slot_acquire(second)  # pending: never held
    slot_hold(released)
    slot_release(released)
    keys = {ident: cache.make_key(f"stream:open:{ident}") for ident in addresses}
    for ident, slot in [(first, s) for s in held[:2]] + [(second, held[2]), (second, pending)]:
        redis.zadd(keys[ident], {slot.member: 5.0})  # as if about to lapse
    try:
        before = time.time()
        renewed = slots_renew()
        after = time.time()
        assert renewed == 3
        for ident, slot in [(first, held[0]), (first, held[1]), (second, held[2])]:
            score = redis.zscore(keys[ident], slot.member)
            assert before + 60 <= score <= after + 60
        assert redis.zscore(keys[second], pending.member) == 5.0  # not held: left to lapse
        assert redis.zscore(keys[first], released.member) is None  # released: not brought back
        assert all(0 < redis.ttl(key) <= 60 for key in keys.values())
    finally:
        for slot in held:
            slot_release(slot)
    assert slots_renew() == 0
