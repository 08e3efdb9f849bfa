"""The dispatcher (`python manage.py webhooks_dispatch`, the Procfile's `webhooks`): fans the
outbox out to the matching endpoints and sends every due delivery.

- State lives in PostgreSQL only. A delivery is claimed by leasing it (`leased_until`, and its
  `next_attempt_at` moved as far ahead), so a dispatcher that dies mid-attempt leaves it to be
  sent again when the lease ends (at least once).
- It claims no more deliveries than it has free senders (settings.WEBHOOK_WORKERS threads minus
  its sends in flight), so a claimed delivery goes to a sender at once and never waits in a
  queue while its lease runs: a delivery is never sent twice at once.
- The free senders are shared fairly (webhooks.services.claim_fair): across API keys first
  (the key with the fewest sends in flight here takes the next), then across the key's
  endpoints, one due delivery per endpoint per turn, oldest first. Failing endpoints (whose
  last attempt failed or timed out) hold at most settings.WEBHOOK_FAILING_WORKERS senders
  together (default a quarter of the workers); the rest is kept for the others. An endpoint
  this dispatcher has not yet seen answer (new, or since its start) shares the failing
  endpoints' senders until its first 2xx: a hundred endpoints never heard from cannot take
  every sender for WEBHOOK_TIMEOUT before they are known to fail.
- The per-endpoint cap (settings.WEBHOOK_PER_ENDPOINT) holds across dispatcher processes: the
  claim counts each endpoint's leased deliveries, whoever leased them, and claims are
  serialized across dispatchers by a PostgreSQL transaction advisory lock (webhooks.services.
  deliveries_claim), so two claims never both take an endpoint's last slot. A dispatcher that
  died holds its slots until its leases end.
- The threads only send (webhooks/sending.py, one pool of kept-alive connections per endpoint
  address); this thread reads and writes the database: finished attempts are recorded in
  batches, one transaction each (webhooks.services.deliveries_record_attempts).
- It wakes on the outbox's NOTIFY (PostgreSQL) or every settings.WEBHOOK_POLL_SECONDS, and as
  soon as a send finishes.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import queue
import select
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import psycopg
from django.conf import settings
from django.db import close_old_connections, connection
from django.utils import timezone

from core.db import listener_conninfo
from webhooks import telemetry
from webhooks.models import Delivery
from webhooks.outbox import NOTIFY_CHANNEL
from webhooks.sending import AttemptResult, ConnectionPools, Signed, attempt_send
from webhooks.services import (
    Finished,
    deliveries_claim,
    deliveries_record_attempts,
    dispatch_lease,
    outbox_fan_out,
)

logger = logging.getLogger(__name__)

_RECORD_BATCH = 500
# The result of a job whose claim lapsed before it was sent: nothing to record.
_NOT_SENT = AttemptResult(None, "not sent: the claim lapsed", 0, "")


@dataclass(frozen=True)
class _Job:
    delivery_id: int
    endpoint_id: int
    key_id: str
    failing: bool
    event_id: str
    signed: Signed
    claimed_at: float = field(default_factory=time.monotonic)  # this process's clock

    def sendable(self, lease: float) -> bool:
        """Whether an attempt started now ends (at its deadline) before the lease does: past
        it another dispatcher may claim the delivery, and two sends would be at once. A
        dispatcher that was frozen (SIGSTOP, a paused VM) finds its clock moved on and sends
        nothing it claimed before."""
        return time.monotonic() + settings.WEBHOOK_TIMEOUT + 1 < self.claimed_at + lease

    def recordable(self, lease: float) -> bool:
        """Whether the delivery is still this dispatcher's to record (its lease not over)."""
        return time.monotonic() < self.claimed_at + lease


class Dispatcher:
    def __init__(
        self,
        *,
        workers: int | None = None,
        per_endpoint: int | None = None,
        failing_workers: int | None = None,
        send: Callable[[Signed], AttemptResult] | None = None,
    ) -> None:
        self._workers = workers or settings.WEBHOOK_WORKERS
        self._per_endpoint = per_endpoint or settings.WEBHOOK_PER_ENDPOINT
        configured = failing_workers or settings.WEBHOOK_FAILING_WORKERS
        self._failing_workers = configured or max(1, self._workers // 4)
        self._pool = ThreadPoolExecutor(self._workers, thread_name_prefix="webhook-send")
        self._connections = ConnectionPools(per_key=self._per_endpoint)
        self._send = send or functools.partial(attempt_send, pools=self._connections)
        self._jobs: dict[int, _Job] = {}  # delivery id -> its send in flight
        self._answered: set[int] = set()  # endpoints whose last attempt here answered 2xx
        self._finished: queue.SimpleQueue[tuple[_Job, datetime, AttemptResult]] = (
            queue.SimpleQueue()
        )
        self._wake = _Wake()

    # --- one round --------------------------------------------------------------------------

    def step(self, *, fan_out: bool = True) -> int:
        """Record the sends that finished, fan out the outbox (unless told there is nothing
        new), send what is due; returns how much was done (0: nothing to do now)."""
        done = self._record_finished()
        while fan_out and (fanned := outbox_fan_out()):
            done += fanned
        done += self._claim_and_send()
        return done

    def _record_finished(self) -> int:
        """Record the finished sends, up to _RECORD_BATCH of them in one transaction (one
        commit for many attempts: the dispatcher's own cost is mostly commits)."""
        finished: list[tuple[_Job, datetime, AttemptResult]] = []
        while len(finished) < _RECORD_BATCH:
            try:
                finished.append(self._finished.get_nowait())
            except queue.Empty:
                break
        if not finished:
            return 0
        lease = dispatch_lease().total_seconds()
        lapsed = {
            job.delivery_id
            for job, _, result in finished
            if result is _NOT_SENT or not job.recordable(lease)
        }
        if lapsed:
            logger.warning(
                "webhook dispatcher: %s claim(s) lapsed before they were sent or recorded (a "
                "freeze?): left to whoever claims them next",
                len(lapsed),
            )
        try:
            statuses = deliveries_record_attempts(
                finished=[
                    Finished(job.delivery_id, at, result)
                    for job, at, result in finished
                    if job.delivery_id not in lapsed
                ]
            )
            for job, _, result in finished:
                if job.delivery_id in lapsed:
                    continue
                if job.delivery_id in statuses:  # else deleted with its endpoint meanwhile
                    telemetry.attempt_recorded(statuses[job.delivery_id], result)
                if result.delivered:
                    self._answered.add(job.endpoint_id)
                else:
                    self._answered.discard(job.endpoint_id)
        finally:
            for job, _, _ in finished:
                self._jobs.pop(job.delivery_id, None)
        return len(finished)

    def _claim_and_send(self) -> int:
        jobs = list(self._jobs.values())
        free = self._workers - len(jobs)
        if free <= 0:
            return 0
        key_load = Counter(job.key_id for job in jobs)
        failing_free = self._failing_workers - sum(job.failing for job in jobs)
        claimed = deliveries_claim(
            free=free,
            per_endpoint=self._per_endpoint,
            failing_free=failing_free,
            key_load=dict(key_load),
            restricted_load=dict(Counter(job.key_id for job in jobs if job.failing)),
            answered=self._answered,
        )
        for claim in claimed:
            job = _Job(
                claim.delivery_id,
                claim.endpoint_id,
                claim.key_id,
                claim.failing,
                claim.signed.message_id,
                claim.signed,
            )
            self._jobs[job.delivery_id] = job
            self._pool.submit(self._attempt, job)
        return len(claimed)

    def _attempt(self, job: _Job) -> None:
        at = timezone.now()
        if not job.sendable(dispatch_lease().total_seconds()):
            self._finished.put((job, at, _NOT_SENT))
            self._wake.set()
            return
        try:
            result = self._send(job.signed)
        except Exception as exc:  # a bug in sending must not lose the delivery's slot
            logger.exception("webhook send failed", extra={"event_id": job.event_id})
            result = AttemptResult(None, f"internal error: {type(exc).__name__}", 0, "")
        self._finished.put((job, at, result))
        self._wake.set()

    # --- running ------------------------------------------------------------------------------

    @property
    def in_flight(self) -> int:
        return len(self._jobs)

    def run(self, stop: threading.Event) -> None:
        """Rounds until `stop` is set, sleeping while there is nothing to do."""
        poll, fanned_at = settings.WEBHOOK_POLL_SECONDS, 0.0

        def wake_on_stop() -> None:  # a stop ends the wait for a NOTIFY at once
            stop.wait()
            self._wake.set()

        threading.Thread(target=wake_on_stop, daemon=True, name="webhook-stop").start()
        with _Listener() as listener:
            while not stop.is_set():
                # The outbox is read when a commit wrote it (NOTIFY) or every poll.
                fan_out = listener.notified() or time.monotonic() - fanned_at >= poll
                fanned_at = time.monotonic() if fan_out else fanned_at
                try:
                    worked = self.step(fan_out=fan_out)
                except Exception:
                    logger.exception("webhook dispatcher round failed")
                    close_old_connections()  # a broken connection is opened anew next round
                    worked = 0
                    stop.wait(1)
                if not worked:
                    listener.wait(self._wake, settings.WEBHOOK_POLL_SECONDS)
                    self._wake.clear()
        self.close()
        connection.close()  # this thread's

    def drain(self, *, timeout: float = 30.0, until: Callable[[], bool] | None = None) -> None:
        """Rounds until nothing is in flight or due (or `until()` holds), at most `timeout`
        seconds: for tests and tools, in the caller's thread and transaction."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.step()
            if until is not None:
                if until():
                    return
            elif not self._jobs and not _due_now():
                return
            self._wake.wait(0.02)
            self._wake.clear()
        raise TimeoutError("the webhook dispatcher did not drain in time")

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        while self._record_finished():
            pass
        self._connections.close()
        self._wake.close()


def _due_now() -> bool:
    return Delivery.objects.filter(
        status=Delivery.Status.PENDING,
        next_attempt_at__lte=timezone.now(),
        endpoint__enabled=True,
    ).exists()


class _Wake:
    """A threading.Event that can also be waited for with select(): a send that finishes wakes
    the dispatcher at once, also while it waits for a NOTIFY."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._read, self._write = os.pipe()
        os.set_blocking(self._read, False)
        os.set_blocking(self._write, False)

    def set(self) -> None:
        if not self._event.is_set():
            self._event.set()
            with contextlib.suppress(BlockingIOError):
                os.write(self._write, b"!")

    def is_set(self) -> bool:
        return self._event.is_set()

    def wait(self, timeout: float) -> bool:
        return self._event.wait(timeout)

    def clear(self) -> None:
        self._event.clear()
        with contextlib.suppress(BlockingIOError):
            while os.read(self._read, 4096):
                pass

    def fileno(self) -> int:
        return self._read

    def close(self) -> None:
        if self._read >= 0:
            os.close(self._read)
            os.close(self._write)
            self._read = self._write = -1


class _Listener:
    """LISTEN on the outbox's channel (PostgreSQL): a commit that writes the outbox wakes the
    dispatcher at once. Elsewhere (SQLite, the demo) it polls."""

    def __init__(self) -> None:
        self._connection: Any = None

    def __enter__(self) -> _Listener:
        if connection.vendor == "postgresql":
            try:
                self._connection = psycopg.connect(listener_conninfo(), autocommit=True)
                self._connection.execute(f"LISTEN {NOTIFY_CHANNEL}")
            except psycopg.Error:
                logger.warning("webhook dispatcher: LISTEN failed, polling instead")
                self._connection = None
        return self

    def wait(self, wake: _Wake, seconds: float) -> None:
        """Until a NOTIFY, `wake` set, or `seconds` passed."""
        if wake.is_set():
            return
        if self._connection is None:
            wake.wait(seconds)
            return
        select.select([self._connection.fileno(), wake], [], [], seconds)

    def notified(self) -> bool:
        """Whether a NOTIFY came since the last call (without waiting); always true without
        LISTEN."""
        if self._connection is None:
            return True
        readable, _, _ = select.select([self._connection.fileno()], [], [], 0)
        if not readable:
            return False
        return any(True for _ in self._connection.notifies(timeout=0, stop_after=1000))

    def __exit__(self, *exc_info: object) -> None:
        if self._connection is not None:
            self._connection.close()
