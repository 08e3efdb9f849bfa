"""Retention of push (extensions.md, "Webhooks, Retention"): the feed's events (the outbox, whose
ids are the live stream's cursors) are kept settings.PUSH_RETENTION_DAYS, deliveries with their
attempts and history settings.DELIVERY_RETENTION_DAYS; the beat's jobs (sync/tasks.py) delete
what is older.

- Each table is deleted from its oldest id up, in batches of settings.RETENTION_BATCH rows, each
  batch its own short transaction, up to the first row that is still kept: what is deleted is
  always every id up to some id, which `RetentionMark.deleted_through` records in the batch's
  transaction. A cursor below it names a row that is gone: the stream answers it with a `reset`
  (stream/feed.py), the deliveries listing with a 410 (webhooks/selectors.py), never with a gap.
- The rows go by SQL, never loaded (no model signals: a history row per delivery deleted would
  double what is deleted), with what refers to them: a delivery's attempts; an event's
  deliveries and attempts (normally gone already, their retention is shorter), the
  `eventRemoved` that withdraws it keeps its payload (`removedId`) and loses the reference.
- Locks are taken in the order the dispatcher takes them (outbox rows, then deliveries; an
  attempt's recording locks its endpoint, then its delivery, and a batch locks no endpoint), so
  a batch and a dispatcher wait for each other at most, and an attempt recorded meanwhile is
  deleted with its delivery.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from webhooks.models import Attempt, Delivery, OutboxEvent, RetentionMark

_OUTBOX = OutboxEvent._meta.db_table
_DELIVERY = Delivery._meta.db_table
_ATTEMPT = Attempt._meta.db_table
_HISTORY = Delivery.history.model._meta.db_table


@dataclass(frozen=True)
class Pruned:
    rows: int  # events, or deliveries
    attempts: int = 0
    history: int = 0


def retention_horizon(table: RetentionMark.Table) -> int:
    """Every id of the table up to this one is deleted (0: none)."""
    mark = RetentionMark.objects.filter(table=table).values_list("deleted_through", flat=True)
    return mark.first() or 0


def outbox_prune(
    *, batch: int | None = None, seconds: float | None = None, now: datetime | None = None
) -> Pruned:
    """Delete the outbox's rows older than PUSH_RETENTION_DAYS (with any delivery of them),
    batch by batch, starting no batch after `seconds`; returns how many were deleted."""
    cutoff = (now or timezone.now()) - timedelta(days=settings.PUSH_RETENTION_DAYS)
    return _batches(_outbox_batch, cutoff, batch or settings.RETENTION_BATCH, _deadline(seconds))


def deliveries_prune(
    *, batch: int | None = None, seconds: float | None = None, now: datetime | None = None
) -> Pruned:
    """Delete the deliveries older than DELIVERY_RETENTION_DAYS with their attempts, then their
    history rows older than that, batch by batch, starting no batch after `seconds`."""
    cutoff = (now or timezone.now()) - timedelta(days=settings.DELIVERY_RETENTION_DAYS)
    size, deadline = batch or settings.RETENTION_BATCH, _deadline(seconds)
    pruned, history = _batches(_deliveries_batch, cutoff, size, deadline), 0
    while deadline is None or time.monotonic() < deadline:
        with transaction.atomic():
            deleted = _execute(
                f"DELETE FROM {_HISTORY} WHERE history_id IN (SELECT history_id FROM "
                f"{_HISTORY} WHERE history_date < %s LIMIT %s)",
                [cutoff, size],
            )
        history += deleted
        if deleted < size:
            break
    return Pruned(pruned.rows, pruned.attempts, history)


def _deadline(seconds: float | None) -> float | None:
    return None if seconds is None else time.monotonic() + seconds


def _batches(one, cutoff: datetime, size: int, deadline: float | None) -> Pruned:
    rows = attempts = 0
    while deadline is None or time.monotonic() < deadline:
        done = one(cutoff, size)
        if done is None:
            break
        rows, attempts = rows + done.rows, attempts + done.attempts
    return Pruned(rows, attempts)


def _outbox_batch(cutoff: datetime, size: int) -> Pruned | None:
    """One batch of the outbox's oldest rows older than `cutoff`; None: nothing (more) to do."""
    with transaction.atomic():
        mark = _mark(RetentionMark.Table.OUTBOX)
        span = _span(OutboxEvent.objects.all(), mark, cutoff, size)
        if span is None:
            return None
        # The rows first (a fan-out skips them), then their deliveries (an attempt recorded
        # meanwhile commits before they are collected, or finds its delivery gone).
        _lock(_OUTBOX, "id", span)
        _lock(_DELIVERY, "event_id", span)
        attempts = _execute(
            f"DELETE FROM {_ATTEMPT} WHERE delivery_id IN "
            f"(SELECT id FROM {_DELIVERY} WHERE event_id > %s AND event_id <= %s)",
            span,
        )
        _execute(f"DELETE FROM {_DELIVERY} WHERE event_id > %s AND event_id <= %s", span)
        _execute(
            f"UPDATE {_OUTBOX} SET removes_id = NULL WHERE removes_id > %s AND removes_id <= %s",
            span,
        )
        rows = _execute(f"DELETE FROM {_OUTBOX} WHERE id > %s AND id <= %s", span)
        _advance(mark, span)
    return Pruned(rows, attempts)


def _deliveries_batch(cutoff: datetime, size: int) -> Pruned | None:
    with transaction.atomic():
        mark = _mark(RetentionMark.Table.DELIVERIES)
        span = _span(Delivery.objects.all(), mark, cutoff, size)
        if span is None:
            return None
        _lock(_DELIVERY, "id", span)
        attempts = _execute(
            f"DELETE FROM {_ATTEMPT} WHERE delivery_id > %s AND delivery_id <= %s", span
        )
        rows = _execute(f"DELETE FROM {_DELIVERY} WHERE id > %s AND id <= %s", span)
        _advance(mark, span)
    return Pruned(rows, attempts)


def _mark(table: RetentionMark.Table) -> RetentionMark:
    """The table's mark, locked until the batch commits (one batch of a table at a time)."""
    RetentionMark.objects.get_or_create(table=table)
    return RetentionMark.objects.select_for_update().get(table=table)


def _span(rows, mark: RetentionMark, cutoff: datetime, size: int) -> tuple[int, int] | None:
    """(after, through): the next `size` ids at most after the mark, up to the first row
    created at or after `cutoff`; None when the next row is kept."""
    after, through = mark.deleted_through, None
    ahead = rows.filter(id__gt=after).order_by("id").values_list("id", "created_at")[:size]
    for row_id, created_at in ahead:
        if created_at >= cutoff:
            break
        through = row_id
    return None if through is None else (after, through)


def _advance(mark: RetentionMark, span: tuple[int, int]) -> None:
    mark.deleted_through = span[1]
    mark.ran_at = timezone.now()
    mark.save(update_fields=["deleted_through", "ran_at"])


def _lock(table: str, column: str, span: tuple[int, int]) -> None:
    """Lock the table's rows whose `column` is in the span (PostgreSQL; SQLite has one writer),
    without reading them into Python."""
    if connection.vendor == "postgresql":
        _execute(
            f"SELECT count(*) FROM (SELECT 1 FROM {table} WHERE {column} > %s "
            f"AND {column} <= %s FOR UPDATE) AS locked",
            span,
        )


def _execute(sql: str, params) -> int:
    with connection.cursor() as cursor:
        cursor.execute(sql, list(params))
        return cursor.rowcount
