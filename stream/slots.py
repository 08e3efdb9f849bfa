"""Open streams per client address (STREAM_MAX_PER_IP), counted across every stream process in
Redis: a sorted set per address whose members are its open streams and whose scores are when
each lapses unless renewed (the process renews all its slots, RENEW_BATCH to a script call, a
third of STREAM_SLOT_SECONDS apart: stream/hub.py; so the slots of a process that died lapse
within STREAM_SLOT_SECONDS).
While Redis is away (core/redisguard.py), or where the cache is not Redis (the demo), each
process counts its own.

A slot is taken by the connect (stream/api/views.py) and held once its stream starts
(stream/grants.py's grant_take); only held slots are renewed, so the slot of a connect whose
client went away before its stream started lapses in Redis even if nothing releases it."""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.cache import cache

from core import redisguard
from core.errors import Busy

_local: Counter[str] = Counter()
_local_lock = threading.Lock()
_shared: set[Slot] = set()  # this process's held slots counted in Redis, renewed together
RENEW_BATCH = 500  # slots renewed per script call: Redis runs one script at a time

# KEYS[1]: the address's set; ARGV: now, lapse time, member, limit, ttl. 1: taken, 0: full.
_ACQUIRE = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[4]) then return 0 end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[3])
redis.call('EXPIRE', KEYS[1], ARGV[5])
return 1
"""
# KEYS: the addresses' sets, one per slot; ARGV: lapse time, ttl, then KEYS[i]'s member at 2 + i.
# A released slot's member is gone: ZADD XX does not bring it back.
_RENEW = """
for i, key in ipairs(KEYS) do
  redis.call('ZADD', key, 'XX', ARGV[1], ARGV[i + 2])
  redis.call('EXPIRE', key, ARGV[2])
end
return #KEYS
"""


@dataclass(frozen=True)
class Slot:
    ident: str
    member: str
    shared: bool  # counted in Redis, else in this process
    key: str = ""  # the address's set in Redis, where shared


def _redis() -> Any:
    if not (hasattr(cache, "client") and hasattr(cache.client, "get_client")):
        return None
    return cache.client.get_client(write=True)


def _key(ident: str) -> str:
    return cache.make_key(f"stream:open:{ident}")


def slot_acquire(ident: str) -> Slot:
    """A slot for one more stream of `ident`, or Busy (429) when it has STREAM_MAX_PER_IP."""
    limit, ttl = settings.STREAM_MAX_PER_IP, settings.STREAM_SLOT_SECONDS
    member = uuid.uuid4().hex
    client = _redis()
    if client is not None:
        now, key = time.time(), _key(ident)
        taken = redisguard.call(
            "stream slots",
            lambda: client.eval(_ACQUIRE, 1, key, now, now + ttl, member, limit, ttl),
        )
        if taken is not redisguard.UNAVAILABLE:
            if not taken:
                raise _busy(limit)
            return Slot(ident, member, shared=True, key=key)
    with _local_lock:
        if _local[ident] >= limit:
            raise _busy(limit)
        _local[ident] += 1
    return Slot(ident, member, shared=False)


def slot_hold(slot: Slot) -> None:
    """The slot's stream started: the slot is renewed with the process's others until
    released."""
    if slot.shared:
        with _local_lock:
            _shared.add(slot)


def slots_renew() -> int:
    """Every slot of this process counted in Redis renewed (a script call per RENEW_BATCH);
    how many."""
    client = _redis()
    with _local_lock:
        slots = list(_shared)
    if client is None or not slots:
        return 0
    ttl = settings.STREAM_SLOT_SECONDS
    lapse = time.time() + ttl

    def renew() -> None:
        for k in range(0, len(slots), RENEW_BATCH):
            batch = slots[k : k + RENEW_BATCH]
            keys, members = [s.key for s in batch], [s.member for s in batch]
            client.eval(_RENEW, len(keys), *keys, lapse, ttl, *members)

    redisguard.call("stream slots", renew)
    return len(slots)


def slot_release(slot: Slot) -> None:
    client = _redis()
    if slot.shared and client is not None:
        with _local_lock:
            _shared.discard(slot)
        redisguard.call("stream slots", lambda: client.zrem(slot.key, slot.member))
        return
    with _local_lock:
        _local[slot.ident] -= 1
        if _local[slot.ident] <= 0:
            del _local[slot.ident]


def _busy(limit: int) -> Busy:
    return Busy(
        f"At most {limit} open streams per client address; close one first.",
        retry_after=5,
    )
