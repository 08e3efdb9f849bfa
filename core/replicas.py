"""Read replicas (DATABASE_REPLICA_URLS): the read endpoints read from a PostgreSQL streaming
replica when it is as fresh as the primary would be for them, else from the primary.

Freshness is decided by WAL position, not by time alone. Every write to what the read endpoints
serve moves the data's generation (core/api/documents.py), and in a process that has replicas
configured the generation token carries the primary's WAL position just after the write
committed (`@<lsn>`): every process that writes (the jobs, the follower) must have
DATABASE_REPLICA_URLS set as the web processes do, or the reads after its writes stay on the
primary (safe, not spread). A read
endpoint has read that token before it reads anything (its ETag is made of it), and reads from
a replica only when the replica has replayed at least that position, so the answer holds every
write its ETag stands for, exactly as the primary's would: a replica held behind (replay paused,
a slow disk) is simply not chosen until it caught up, and the two-second freshness promise
holds through any lag. A replica must also replay within REPLICA_MAX_LAG_SECONDS of the primary
(its last replayed transaction's age while it has WAL left to replay), so that one far behind is
not even asked.

Each process keeps each replica's last replay position and lag, checked again when it last
checked more than REPLICA_CHECK_SECONDS ago or when the position it knows is behind what a read
needs (at most every REPLICA_RECHECK_SECONDS): a replica that caught up serves the next read. A
replica that does not answer is left alone for REPLICA_RETRY_SECONDS; a read that fails on a
replica is answered again from the primary (core/api/conditional.py).

`read_target` names the database of this context's reads ("default", the primary, unless a read
view chose a replica): the router sends the ORM's reads there, `reading()` the raw statements'.
Writes, the admin, the jobs and the deposit endpoints never leave the primary.
"""

from __future__ import annotations

import contextlib
import contextvars
import itertools
import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections
from django.db.backends.base.base import BaseDatabaseWrapper

from core import telemetry

logger = logging.getLogger(__name__)

REPLICA_PREFIX = "replica"

_target: contextvars.ContextVar[str] = contextvars.ContextVar(
    "db_read_target", default=DEFAULT_DB_ALIAS
)

# What a replica reports: the WAL position it replayed, and its lag in seconds (0 when it has
# replayed all it received; else the age of the last transaction it replayed).
_STATE_SQL = """
SELECT pg_last_wal_replay_lsn()::text,
       CASE WHEN pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn() THEN 0
            ELSE COALESCE(EXTRACT(EPOCH FROM now() - pg_last_xact_replay_timestamp()), 0)
       END::float8
"""


def replica_aliases() -> list[str]:
    """The configured replicas' database aliases, in order (replica1, replica2, ...)."""
    return [alias for alias in settings.DATABASES if alias.startswith(REPLICA_PREFIX)]


def parse_lsn(text: str) -> int:
    """A WAL position ("16/B374D848") as a number that orders as the positions do."""
    high, _, low = text.partition("/")
    return (int(high, 16) << 32) + int(low, 16)


def current_lsn(connection: BaseDatabaseWrapper) -> str | None:
    """The primary's WAL position now (after what this connection committed), or None where
    it is not needed (no replica configured in this process) or cannot be read (not
    PostgreSQL, inside a transaction, a database error)."""
    if not replica_aliases() or connection.vendor != "postgresql" or connection.in_atomic_block:
        return None
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_current_wal_lsn()::text")
            return str(cursor.fetchone()[0])
    except DatabaseError:
        logger.warning("the primary's WAL position could not be read", exc_info=True)
        return None


@dataclass
class ReplicaState:
    alias: str
    replay_lsn: int | None = None
    lag_seconds: float | None = None
    checked_at: float = 0.0  # time.monotonic()
    error: str = ""

    def serves(self, needed: int) -> bool:
        return (
            not self.error
            and self.replay_lsn is not None
            and self.replay_lsn >= needed
            and self.lag_seconds is not None
            and self.lag_seconds < settings.REPLICA_MAX_LAG_SECONDS
        )


_states: dict[str, ReplicaState] = {}
_states_lock = threading.Lock()
_rotation = itertools.count()


def _state(alias: str) -> ReplicaState:
    with _states_lock:
        return _states.setdefault(alias, ReplicaState(alias))


def _ask(alias: str) -> tuple[str | None, float]:
    with connections[alias].cursor() as cursor:
        cursor.execute(_STATE_SQL)
        return cursor.fetchone()


def check(alias: str) -> ReplicaState:
    """Ask the replica its replay position and lag now (one short query). A connection this
    thread kept open that fails (the replica restarted since: the server ended it) is replaced
    once, so that a replica back from a restart is not taken for down by each thread in turn."""
    state = _state(alias)
    state.checked_at = time.monotonic()
    try:
        kept = connections[alias].connection is not None
        try:
            lsn, lag = _ask(alias)
        except DatabaseError:
            if not kept:
                raise
            _close_quietly(alias)
            lsn, lag = _ask(alias)
    except DatabaseError as exc:
        state.error = type(exc).__name__
        state.replay_lsn = state.lag_seconds = None
        _close_quietly(alias)
        return state
    state.error = ""
    state.replay_lsn = None if lsn is None else parse_lsn(lsn)  # None: not a replica
    state.lag_seconds = float(lag)
    return state


def failed(alias: str, error: BaseException) -> None:
    """A read on the replica failed: leave it alone for REPLICA_RETRY_SECONDS."""
    state = _state(alias)
    state.error = type(error).__name__
    state.checked_at = time.monotonic()
    _close_quietly(alias)
    logger.warning("replica %s failed a read (%s); reading from the primary", alias, state.error)


def _close_quietly(alias: str) -> None:
    with contextlib.suppress(Exception):
        connections[alias].close()


def _fresh_enough(state: ReplicaState, needed: int, now: float) -> ReplicaState:
    age = now - state.checked_at
    if state.error:
        return check(state.alias) if age >= settings.REPLICA_RETRY_SECONDS else state
    if age >= settings.REPLICA_CHECK_SECONDS or (
        not state.serves(needed) and age >= settings.REPLICA_RECHECK_SECONDS
    ):
        return check(state.alias)
    return state


def choose_replica(needed_lsn: int | None) -> str | None:
    """A replica that has replayed `needed_lsn` within the lag allowed, or None (the primary).
    The replicas are tried in turn from a rotating start, so that reads spread over them."""
    aliases = replica_aliases()
    if needed_lsn is None or not aliases:
        return None
    now = time.monotonic()
    start = next(_rotation) % len(aliases)
    for alias in aliases[start:] + aliases[:start]:
        if _fresh_enough(_state(alias), needed_lsn, now).serves(needed_lsn):
            return alias
    return None


def read_target() -> str:
    """The database this context reads from."""
    return _target.get()


def reading() -> BaseDatabaseWrapper:
    """The connection of this context's reads, for raw statements."""
    return connections[_target.get()]


@contextlib.contextmanager
def reads_from(alias: str | None) -> Iterator[None]:
    """Send this context's reads to `alias` (None: the primary), counted by target."""
    token = _target.set(alias or DEFAULT_DB_ALIAS)
    telemetry.database_read(alias or "primary")
    try:
        yield
    finally:
        _target.reset(token)


def replicas_health() -> list[dict[str, Any]]:
    """Each replica as /health shows it: checked now."""
    out = []
    for alias in replica_aliases():
        state = check(alias)
        out.append(
            {
                "name": alias,
                "status": "down" if state.error or state.replay_lsn is None else "ok",
                "error": state.error or (None if state.replay_lsn is not None else "not a replica"),
                "lagSeconds": None if state.lag_seconds is None else round(state.lag_seconds, 3),
            }
        )
    return out


def forget_states() -> None:
    """Drop what this process knows of the replicas (tests)."""
    with _states_lock:
        _states.clear()


class ReplicaRouter:
    """The ORM's reads go where this context reads (`reads_from`); writes and migrations to
    the primary."""

    def db_for_read(self, model: Any, **hints: Any) -> str:
        return _target.get()

    def db_for_write(self, model: Any, **hints: Any) -> str:
        return DEFAULT_DB_ALIAS

    def allow_relation(self, obj1: Any, obj2: Any, **hints: Any) -> bool:
        return True

    def allow_migrate(self, db: str, app_label: str, **hints: Any) -> bool:
        return db == DEFAULT_DB_ALIAS
