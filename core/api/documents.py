"""A cache of the hot read documents, invalidated whenever the data behind them changes.

Every write to the models the LAT documents are built from bumps a generation token (at once,
and again when the transaction commits, once for all its writes, so that a reader racing the
commit cannot pin old data under the new token). A cached document is served only while its
token is the current one and for at most DOCUMENT_CACHE_SECONDS after it was built (checked on
read as well as by the cache's own expiry, so a late write cannot stretch it); that bound is
also what a cache without shared invalidation (local memory, one per process) can serve. With
Redis the token and the documents are shared by every process, and a hit costs one round trip
(MGET of the token and the document; of the token alone where the process holds a copy of the
entry read or stored before, which it answers while the token is still the entry's: `_held`).

Redis is optional here (core/redisguard.py): while it cannot be reached, documents are built
from the database. An invalidation that could not reach Redis is remembered by the process and
sent again as soon as Redis answers (before the next cached read, on the breaker's recovery,
and by a timer every REDIS_RETRY_AFTER seconds), so that a write made during an outage is not
hidden by a document cached before it; documents cached by other processes expire within
DOCUMENT_CACHE_SECONDS whatever happens. During an outage each process keeps its own documents
for at most DOCUMENT_FALLBACK_SECONDS (a write in the process drops them at once), so that the
hot reads stay near their cached speed while another process's writes show up that much later.

`current_generation` names the data's generation for the ETags of the read endpoints
(core/api/conditional.py), with the same bounds: the shared token while Redis answers, else
this process's own generation, which also moves on every DOCUMENT_FALLBACK_SECONDS.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any, TypeGuard

from django.conf import settings
from django.core.cache import cache
from django.db import DEFAULT_DB_ALIAS, connection, connections, transaction

from core import redisguard
from core.replicas import current_lsn, parse_lsn

logger = logging.getLogger(__name__)

# Generation keys whose bump could not reach Redis, and the timer that retries them.
_pending: set[str] = set()
_pending_lock = threading.Lock()
_retry_timer: threading.Timer | None = None
# While Redis is unavailable: this process's documents, key -> (expires at, generation, document).
_local: dict[str, tuple[float, int, Any]] = {}
_local_generation = 0
_PROCESS = uuid.uuid4().hex[:12]  # tells this process's local generations from another's
LOCAL_MAX_DOCUMENTS = 1024


def _keys(name: str) -> tuple[str, str]:
    # The default connection's settings (the same dict: a test database's name is set in it),
    # read without the connection itself, which a thread-local lookup gives on every access.
    database = connections.settings[DEFAULT_DB_ALIAS]["NAME"]  # test databases share nothing
    return f"docs-generation:{database}", f"doc:{database}:{name}"


def _token() -> str:
    """A new generation token: random, and on PostgreSQL (outside a transaction: after the
    write committed) `@` the primary's WAL position, which a replica must have replayed to
    serve the reads of this generation (core/replicas.py)."""
    token = uuid.uuid4().hex
    lsn = current_lsn(connection)
    return f"{token}@{lsn}" if lsn else token


def generation_lsn(generation: str) -> int | None:
    """The WAL position a generation (as `current_generation` names it) was made at, or None
    where it names none (made inside a transaction, on SQLite, or this process's own)."""
    if not generation.startswith("shared:"):
        return None
    _, at, lsn = generation.rpartition("@")
    if not at:
        return None
    try:
        return parse_lsn(lsn)
    except ValueError:
        return None


def _set_generation(key: str) -> bool:
    token = _token()
    done = redisguard.call("document invalidation", lambda: cache.set(key, token, timeout=None))
    return done is not redisguard.UNAVAILABLE


def _bump() -> None:
    key = _keys("")[0]
    if not _set_generation(key):
        with _pending_lock:
            _pending.add(key)
        _schedule_retry()


def retry_pending_bumps() -> bool:
    """Send the invalidations that could not reach Redis; True when none is left."""
    with _pending_lock:
        keys = list(_pending)
    for key in keys:
        if not _set_generation(key):
            return False
        with _pending_lock:
            _pending.discard(key)
    return True


def _schedule_retry() -> None:
    """Retry the pending bumps on a timer, so that a process that only writes (a Celery worker)
    still invalidates soon after Redis is back."""
    global _retry_timer
    with _pending_lock:
        if _retry_timer is not None and _retry_timer.is_alive():
            return
        _retry_timer = threading.Timer(settings.REDIS_RETRY_AFTER, _retry_from_timer)
        _retry_timer.daemon = True
        _retry_timer.start()


def _retry_from_timer() -> None:
    global _retry_timer
    with _pending_lock:
        _retry_timer = None
    if not retry_pending_bumps():
        _schedule_retry()


def forget_pending_bumps() -> None:
    """Drop the pending bumps and their timer (tests)."""
    global _retry_timer
    with _pending_lock:
        _pending.clear()
        if _retry_timer is not None:
            _retry_timer.cancel()
        _retry_timer = None


def _on_recovery() -> None:
    if _pending:
        retry_pending_bumps()


redisguard.breaker.on_recovery(_on_recovery)


def _bump_local() -> None:
    global _local_generation
    _local_generation += 1


def _local_document(key: str, build: Callable[[], Any], seconds: int) -> Any:
    """The outage path: a document of this process's own, kept for a short while."""
    now = time.monotonic()
    entry = _local.get(key)
    if entry is not None and entry[0] > now and entry[1] == _local_generation:
        return entry[2]
    generation = _local_generation
    document = build()
    if len(_local) >= LOCAL_MAX_DOCUMENTS:
        _local.clear()
    ttl = min(seconds, settings.DOCUMENT_FALLBACK_SECONDS)
    _local[key] = (now + ttl, generation, document)
    return document


def documents_changed(**_signal_kwargs: Any) -> None:
    """Invalidate every cached document (also a signal receiver for model writes): now, and
    again once the transaction commits (once per transaction, however many rows it writes)."""
    _bump_local()
    _bump()
    current = transaction.get_connection()
    if not current.in_atomic_block:
        return
    # Django drops a callback whose savepoint rolls back: a later write then registers anew.
    if not any(entry[1] is _bump_committed for entry in current.run_on_commit):
        transaction.on_commit(_bump_committed)


def _bump_committed() -> None:
    _bump_local()
    _bump()


# What a view read of the cache ahead for this request: (True, the value or None) for a key it
# read (core.api.throttling.prefetched), else (False, None).
CacheRead = Callable[[str], tuple[bool, Any]]


def document_keys(name: str) -> list[str]:
    """The cache keys `cached_document(name, ...)` reads (none while documents are not
    cached), for a view to read ahead in the rate limit's round trip (prefetch_cache_keys):
    the generation alone while this process holds a copy of the document (`_held`)."""
    if not settings.DOCUMENT_CACHE_SECONDS:
        return []
    generation_key, document_key = _keys(name)
    return [generation_key] if document_key in _held else [generation_key, document_key]


# The entries (generation, built at, document) this process last read from the cache or stored
# there for the documents read ahead, by cache key. A request whose generation, read ahead, is a
# held entry's is answered from it on the cache's own terms (that generation, built within
# DOCUMENT_CACHE_SECONDS), without reading the document from Redis again: a cached LAT detail's
# ~3 kB, unpickled, cost a hit more than the rest of its round trip. Where the generation moved,
# the document is read (a second round trip, once per process and change) or built.
_held: dict[str, tuple[Any, float, Any]] = {}


def _current(entry: Any, generation: Any, seconds: int) -> TypeGuard[tuple[Any, float, Any]]:
    """Whether a cache entry is one to answer at `generation` (the shared token)."""
    return (
        generation is not None
        and isinstance(entry, tuple)
        and len(entry) == 3
        and entry[0] == generation
        and 0 <= time.time() - entry[1] < seconds
    )


def _hold(key: str, entry: tuple[Any, float, Any]) -> None:
    if len(_held) >= LOCAL_MAX_DOCUMENTS and key not in _held:
        _held.clear()
    _held[key] = entry


def cached_document(
    name: str,
    build: Callable[[], Any],
    *,
    read: CacheRead | None = None,
) -> Any:
    """The document `name`, built by `build` when the cache holds none of the current
    generation, or found in what `read` gives when its keys were read ahead."""
    seconds = settings.DOCUMENT_CACHE_SECONDS
    if not seconds:
        return build()
    generation_key, document_key = _keys(name)
    if _pending and not retry_pending_bumps():
        return _local_document(document_key, build, seconds)
    if read is not None and (held := _held.get(document_key)) is not None:
        seen, generation = read(generation_key)
        if seen and _current(held, generation, seconds):
            return held[2]
    found = _read_ahead(read, (generation_key, document_key))
    if found is None:
        found = redisguard.call(
            "document cache", lambda: cache.get_many([generation_key, document_key])
        )
    if found is redisguard.UNAVAILABLE:
        return _local_document(document_key, build, seconds)
    generation = found.get(generation_key)
    entry = found.get(document_key)
    if _current(entry, generation, seconds):
        if read is not None:
            _hold(document_key, entry)
        return entry[2]
    if generation is None:
        generation = _new_generation(generation_key)
    built_at = time.time()
    document = build()
    if generation is not None:
        entry = (generation, built_at, document)
        redisguard.call("document cache", lambda: cache.set(document_key, entry, timeout=seconds))
        if read is not None:
            _hold(document_key, entry)
    return document


def _read_ahead(read: CacheRead | None, keys: tuple[str, ...]) -> dict[str, Any] | None:
    """The keys' values as cache.get_many gives them, when every key was read ahead."""
    if read is None:
        return None
    answers = [read(key) for key in keys]
    if not all(seen for seen, _ in answers):
        return None
    return {key: value for key, (_, value) in zip(keys, answers, strict=True) if value is not None}


def generation_key() -> str:
    """The cache key of the shared generation token (read ahead by the rate limit's round trip
    on the read endpoints: core/api/conditional.py)."""
    return _keys("")[0]


def current_generation(*, read: tuple[bool, Any] = (False, None)) -> str:
    """A token of the data's current generation: it changes whenever `documents_changed` runs.

    While Redis answers (and no invalidation of this process is pending), the shared token,
    created if there is none, the same in every process. Otherwise this process's own generation
    and the current period of DOCUMENT_FALLBACK_SECONDS: a write in another process cannot reach
    it, so it moves at least that often, the bound that the outage path puts on documents.
    `read`: (True, the token or None) when it was read from Redis already for this request."""
    key = generation_key()
    if not _pending or retry_pending_bumps():
        done, found = read
        if not done:
            found = redisguard.call("document cache", lambda: cache.get(key))
        if found is not redisguard.UNAVAILABLE:
            generation = found if found is not None else _new_generation(key)
            if generation is not None:
                return f"shared:{generation}"
    period = int(time.time() // max(settings.DOCUMENT_FALLBACK_SECONDS, 1))
    return f"local:{_PROCESS}:{_local_generation}:{period}"


def _new_generation(generation_key: str) -> str | None:
    """The current generation, created if there is none; None when Redis did not answer."""
    candidate = _token()

    def create() -> str:
        cache.add(generation_key, candidate, timeout=None)
        return cache.get(generation_key, candidate)

    generation = redisguard.call("document cache", create)
    return None if generation is redisguard.UNAVAILABLE else generation
