"""Locks against overlapping runs of the same job: PostgreSQL advisory locks.

`advisory_lock("lats.refresh_lat_state", lat_id)` takes a session-level
`pg_try_advisory_lock` on a 64-bit key derived from the name and ids, without waiting: the
context manager yields True when this connection now holds the lock, False when another
session holds it. The lock is released in `finally`; should the release itself fail, the
connection is closed, which ends the session and with it every lock the session held (as a
worker killed by the hard time limit does).

Session locks need a real session: behind PgBouncer in transaction mode they would be held by
whichever client the pooler gives the server connection to next, so they are taken on the
database's own connection, DATABASE_DIRECT_URL's, where it is set (`session_alias`).

On other databases (the SQLite demo) the lock is a cache entry (`cache.add`), shared between
processes only when the cache is (REDIS_URL set), and expiring after the hard time limit so
that a crashed holder cannot block the job for ever. A cache that cannot be reached means the
lock cannot be taken: the run skips, with a warning.
"""

from __future__ import annotations

import hashlib
import logging
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from django.conf import settings
from django.core.cache import cache
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections

from core import redisguard

logger = logging.getLogger(__name__)

# The project's locks, in one place:
# - each refresh step of each LAT: `advisory_lock(step.job, lat_id)` (sync/jobs.py), keyed by
#   the step's task name (sync/refresh.py). The deposits' writes need no lock of their own:
#   each LAT's are made under its indexing step's, and touch only that LAT's rows and counts.
# - the events and days of each AVS, which LATs may share: `advisory_lock(REWARDS_LOCK,
#   avs_id)` (metrics/avs.py), taken by each LAT's snapshot step.


def lock_key(name: str, *ids: object) -> int:
    """A signed 64-bit key (PostgreSQL's bigint) for the name and ids."""
    text = ":".join([name, *(str(i) for i in ids)])
    return int.from_bytes(
        hashlib.blake2b(text.encode(), digest_size=8).digest(), "big", signed=True
    )


def session_alias() -> str:
    """The database alias whose connections are sessions of their own: `direct` where
    DATABASE_URL goes through a pooler (DATABASE_DIRECT_URL set), else the default."""
    return SESSION_ALIAS if SESSION_ALIAS in connections.settings else DEFAULT_DB_ALIAS


SESSION_ALIAS = "direct"


@contextmanager
def advisory_lock(name: str, *ids: object, using: str | None = None) -> Iterator[bool]:
    """Hold the lock of (name, *ids) for the block if no one else does; yields whether it does."""
    key = lock_key(name, *ids)
    connection = connections[using or session_alias()]
    if connection.vendor != "postgresql":
        with _cache_lock(key) as acquired:
            yield acquired
        return
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s)", [key])
        acquired = bool(cursor.fetchone()[0])
    try:
        yield acquired
    finally:
        if acquired:
            _release(connection, key, name)


def _release(connection, key: int, name: str) -> None:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(%s)", [key])
    except DatabaseError:
        logger.warning("Could not release the lock of %s; closing the connection", name)
        if not connection.in_atomic_block:
            connection.close()


@contextmanager
def _cache_lock(key: int) -> Iterator[bool]:
    """The lock as a cache entry; a cache that cannot be reached means the lock is not taken
    (the job skips this run and the next scheduled one tries again)."""
    cache_key = f"advisory-lock:{key}"
    token = uuid.uuid4().hex
    timeout = settings.CELERY_TASK_TIME_LIMIT + 60
    acquired = redisguard.call("job lock", lambda: cache.add(cache_key, token, timeout=timeout))
    if acquired is redisguard.UNAVAILABLE:
        logger.warning("The cache is unreachable: lock %s not taken, the job skips this run", key)
        acquired = False
    try:
        yield acquired
    finally:
        if acquired:
            redisguard.call("job lock release", lambda: _release_token(cache_key, token))


def _release_token(cache_key: str, token: str) -> None:
    # Not atomic, but a holder only ever deletes its own token. Left in place when the cache
    # cannot be reached: the entry expires after the hard time limit.
    if cache.get(cache_key) == token:
        cache.delete(cache_key)
