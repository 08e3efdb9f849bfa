"""A role that one process holds at a time (the follower of a chain), lost within a bounded time
by a holder that stops without dying (SIGSTOP, a paused VM), and fenced: once it is lost, the
holder writes nothing more, even when it wakes in the middle of its work.

The role is a PostgreSQL advisory lock held by a database session of the holder's own (the
lock session), and the server itself ends the holder's sessions when the holder stops:

- the lock session has `idle_session_timeout` of `lease` seconds, and a heartbeat thread, the
  only user of that session, runs `SELECT 1` on it every lease / 4 seconds: a holder at work
  keeps it, a frozen one (every thread of it stopped) does not, the server ends the session,
  which releases the lock, and a standby's next try takes the role;
- the connection the holder's thread works with (Django's) has the same `idle_session_timeout`
  and `idle_in_transaction_session_timeout`, so a frozen holder's work session ends too (and
  the transaction it was in rolls back), and its statements are fenced: each must go through
  that very session. A holder that wakes finds it ended, its statements fail, and the one that
  would open a new session (Django reconnects a closed connection) raises `LeadershipLost`
  instead, as does any statement once the lock session is gone. No job's error handling catches
  it (a BaseException): the holder stands by and tries again.

A holder that works for longer than `lease` without a statement (a node slower than that) loses
its work session as a frozen one would, and takes the role again if no one else did: nothing
is lost but time. Behind a pooler (DATABASE_DIRECT_URL set) the work connection is pooled and
cannot carry session settings: a holder must then connect to the database itself (the
Procfile's `follow` line sets DATABASE_URL to DATABASE_DIRECT_URL), else it is not fenced.

Elsewhere than PostgreSQL (the SQLite demo) the role is the cache lock of core/locks.py, held
for as long as the process runs, without fencing.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterator

import psycopg
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections

from core.db import listener_conninfo
from core.locks import advisory_lock, lock_key, session_alias

logger = logging.getLogger(__name__)

_SESSION_SETTINGS = ("idle_session_timeout", "idle_in_transaction_session_timeout")


class LeadershipLost(BaseException):
    """The role's sessions ended: the holder must stop acting and stand by."""


class Leadership:
    """The held role: its lock session and heartbeat, and the fence of the work connection."""

    def __init__(self, lease: float, lock_session: psycopg.Connection | None, work: object) -> None:
        self.lease = lease
        self.lock_session = lock_session
        self.work = work  # the psycopg connection the holder's thread works with
        self.lost = threading.Event()
        self.reached_at = time.monotonic()  # the last heartbeat the lock session answered
        self.worked_at = time.monotonic()  # the last statement of the work session
        self._stop = threading.Event()
        self._heartbeat: threading.Thread | None = None

    def fence(self, execute, sql, params, many, context):
        """Django's execute wrapper on the holder's work connection."""
        if self.lost.is_set():
            raise LeadershipLost("the session that held the role ended")
        if context["connection"].connection is not self.work:
            raise LeadershipLost("the work session ended (a new one would not be fenced)")
        result = execute(sql, params, many, context)
        self.worked_at = time.monotonic()
        return result

    def keep_working(self) -> None:
        """Keep the work session from idling out while the holder waits (a chain without a new
        block for longer than the lease): one `SELECT 1` once it idled a quarter of the lease.
        A session the server ended meanwhile (the holder was frozen) is the role lost."""
        if self.work is None or time.monotonic() - self.worked_at < self.lease / 4:
            return
        work = connections[DEFAULT_DB_ALIAS]
        try:
            with work.cursor() as cursor:
                cursor.execute("SELECT 1")
        except DatabaseError as exc:
            raise LeadershipLost(f"the work session ended ({type(exc).__name__})") from exc

    def start_heartbeat(self) -> None:
        self._heartbeat = threading.Thread(
            target=self._beat, name="leadership-heartbeat", daemon=True
        )
        self._heartbeat.start()

    def _beat(self) -> None:
        assert self.lock_session is not None
        while not self._stop.wait(self.lease / 4):
            try:
                self.lock_session.execute("SELECT 1")
            except psycopg.Error:
                logger.warning("the lock session of a role ended: the role is lost")
                self.lost.set()
                return
            self.reached_at = time.monotonic()

    def confirmed(self) -> bool:
        """Whether the role is surely still held by the local clock: the server cannot have
        ended the lock session sooner than `lease` seconds after the last heartbeat it
        answered; half of that is kept as a margin. What a holder does outside the database
        (publishing a task) is done only while this holds: a holder that was frozen finds its
        clock moved on when it wakes."""
        return not self.lost.is_set() and time.monotonic() - self.reached_at < self.lease / 2

    def close(self) -> None:
        self._stop.set()
        if self._heartbeat is not None:
            self._heartbeat.join(5)
        if self.lock_session is not None:
            self.lock_session.close()  # ends the session: the lock is released


def _lock_session(conninfo: str, lease: float) -> psycopg.Connection:
    timeout = int(lease * 1000)
    session = psycopg.connect(conninfo, autocommit=True, connect_timeout=10)
    try:
        session.execute(f"SET idle_session_timeout = {timeout}")
    except psycopg.Error:
        logger.warning("the server ends no idle session (PostgreSQL before 14): a frozen "
                       "holder keeps its role")  # fmt: skip
    return session


@contextlib.contextmanager
def leadership(
    name: str, *ids: object, lease: float, fence: bool = True
) -> Iterator[Leadership | None]:
    """Hold the role (name, *ids) for the block if no one else does: yields its Leadership, or
    None when another holder has it. `LeadershipLost` raised in the block ends it; the caller
    stands by and tries again. With `fence` False the work connection is left as it is (a
    holder whose side effects are not database writes, the beat: `confirmed()` guards them)."""
    work = connections[DEFAULT_DB_ALIAS]
    if work.vendor != "postgresql":
        with advisory_lock(name, *ids) as acquired:
            yield Leadership(float("inf"), None, None) if acquired else None
        return
    session = _lock_session(listener_conninfo(), lease)
    try:
        key = lock_key(name, *ids)
        row = session.execute("SELECT pg_try_advisory_lock(%s)", [key]).fetchone()
        if not (row and row[0]):
            yield None
            return
        work.ensure_connection()
        fenced = fence and session_alias() == DEFAULT_DB_ALIAS
        if fenced:
            _set_work_session(work, lease)
        elif fence:
            logger.warning("%s: the work connection goes through a pooler: not fenced", name)
        held = Leadership(lease, session, work.connection)
        held.start_heartbeat()
        try:
            with work.execute_wrapper(held.fence) if fenced else contextlib.nullcontext():
                yield held
        except LeadershipLost:
            work.close()  # the next holder's work session is a new one
            raise
        finally:
            held.close()
            if fenced:
                _reset_work_session(work)
    finally:
        session.close()


def _set_work_session(work, lease: float) -> None:
    timeout = int(lease * 1000)
    try:
        with work.cursor() as cursor:
            for name in _SESSION_SETTINGS:
                cursor.execute(f"SET {name} = {timeout}")
    except DatabaseError:
        logger.warning("the server ends no idle session (PostgreSQL before 14)")


def _reset_work_session(work) -> None:
    if work.connection is None or work.in_atomic_block:
        return
    with contextlib.suppress(DatabaseError):
        with work.cursor() as cursor:
            for name in _SESSION_SETTINGS:
                cursor.execute(f"RESET {name}")
