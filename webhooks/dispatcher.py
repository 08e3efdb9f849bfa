"""The dispatcher (`python manage.py webhooks_dispatch`, the Procfile's `webhooks`): fans the
outbox out to the matching endpoints and sends every due delivery.

- State lives in PostgreSQL only: a delivery is claimed (SELECT ... FOR UPDATE SKIP LOCKED) by
  moving its `next_attempt_at` a lease ahead, so a dispatcher that dies mid-attempt leaves it to
  be sent again when the lease ends (at least once); a second dispatcher skips what the first
  holds.
- Sends run in a thread pool, at most settings.WEBHOOK_PER_ENDPOINT at a time per endpoint: a
  slow or dead endpoint holds that many threads at most, never the others' sends. The threads
  only send (webhooks/sending.py); this thread reads and writes the database.
- It wakes on the outbox's NOTIFY (PostgreSQL) or every settings.WEBHOOK_POLL_SECONDS, and as
  soon as a send finishes.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from django.conf import settings
from django.db import close_old_connections, connection, transaction
from django.utils import timezone

from core.db import listener_conninfo
from webhooks import telemetry
from webhooks.models import Delivery
from webhooks.outbox import NOTIFY_CHANNEL
from webhooks.sending import AttemptResult, Signed, attempt_send
from webhooks.services import (
    delivery_record_attempt,
    delivery_signed,
    dispatch_lease,
    outbox_fan_out,
)

logger = logging.getLogger(__name__)

_CLAIM_BATCH = 200
_RECORD_BATCH = 200


@dataclass(frozen=True)
class _Job:
    delivery_id: int
    endpoint_id: int
    event_id: str
    signed: Signed


class Dispatcher:
    def __init__(
        self,
        *,
        workers: int | None = None,
        per_endpoint: int | None = None,
        send: Callable[[Signed], AttemptResult] = attempt_send,
    ) -> None:
        self._workers = workers or settings.WEBHOOK_WORKERS
        self._per_endpoint = per_endpoint or settings.WEBHOOK_PER_ENDPOINT
        self._pool = ThreadPoolExecutor(self._workers, thread_name_prefix="webhook-send")
        self._send = send
        self._busy: Counter[int] = Counter()  # endpoint id -> sends in flight
        self._in_flight: set[int] = set()  # delivery ids
        self._finished: queue.SimpleQueue[tuple[_Job, datetime, AttemptResult]] = (
            queue.SimpleQueue()
        )
        self._wake = threading.Event()

    # --- one round --------------------------------------------------------------------------

    def step(self) -> int:
        """Record the sends that finished, fan out the outbox, send what is due; returns how
        much was done (0: nothing to do now)."""
        done = self._record_finished()
        while fanned := outbox_fan_out():
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
        try:
            with transaction.atomic():
                for job, at, result in finished:
                    try:
                        delivery = delivery_record_attempt(
                            delivery_id=job.delivery_id, at=at, result=result
                        )
                        telemetry.attempt_recorded(delivery.status, result)
                    except Delivery.DoesNotExist:
                        pass  # its endpoint was deleted during the attempt
        finally:
            for job, _, _ in finished:
                self._busy[job.endpoint_id] -= 1
                self._in_flight.discard(job.delivery_id)
        return len(finished)

    def _claim_and_send(self) -> int:
        full = [endpoint for endpoint, n in self._busy.items() if n >= self._per_endpoint]
        with transaction.atomic():
            now = timezone.now()
            due = list(
                Delivery.objects.filter(
                    status=Delivery.Status.PENDING,
                    next_attempt_at__lte=now,
                    endpoint__enabled=True,
                )
                .exclude(endpoint_id__in=full)
                .exclude(id__in=self._in_flight)
                .select_related("endpoint", "event")
                .order_by("next_attempt_at", "id")
                .select_for_update(skip_locked=True, of=("self",))[:_CLAIM_BATCH]
            )
            busy = Counter(self._busy)
            claimed: list[Delivery] = []
            for delivery in due:
                if busy[delivery.endpoint_id] < self._per_endpoint:
                    busy[delivery.endpoint_id] += 1
                    claimed.append(delivery)
            Delivery.objects.filter(id__in=[d.id for d in claimed]).update(
                next_attempt_at=now + dispatch_lease()
            )
        for delivery in claimed:
            job = _Job(
                delivery.id,
                delivery.endpoint_id,
                delivery.event.event_id,
                delivery_signed(delivery),
            )
            self._busy[job.endpoint_id] += 1
            self._in_flight.add(job.delivery_id)
            self._pool.submit(self._attempt, job)
        return len(claimed)

    def _attempt(self, job: _Job) -> None:
        at = timezone.now()
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
        return len(self._in_flight)

    def run(self, stop: threading.Event) -> None:
        """Rounds until `stop` is set, sleeping while there is nothing to do."""
        with _Listener() as listener:
            while not stop.is_set():
                try:
                    worked = self.step()
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
            elif not self._in_flight and not _due_now():
                return
            self._wake.wait(0.02)
            self._wake.clear()
        raise TimeoutError("the webhook dispatcher did not drain in time")

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        while self._record_finished():
            pass


def _due_now() -> bool:
    return Delivery.objects.filter(
        status=Delivery.Status.PENDING,
        next_attempt_at__lte=timezone.now(),
        endpoint__enabled=True,
    ).exists()


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

    def wait(self, wake: threading.Event, seconds: float) -> None:
        """Until a NOTIFY, `wake` set, or `seconds` passed."""
        if self._connection is None:
            wake.wait(seconds)
            return
        deadline = time.monotonic() + seconds
        while not wake.is_set() and (left := deadline - time.monotonic()) > 0:
            for _ in self._connection.notifies(timeout=min(left, 0.05), stop_after=1):
                return

    def __exit__(self, *exc_info: object) -> None:
        if self._connection is not None:
            self._connection.close()
