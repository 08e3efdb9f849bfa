"""Default schedules of the refresh jobs, created in django-celery-beat's tables from code.

Beat runs with the DatabaseScheduler, so the schedules live in the database and ops change
them in admin (Periodic tasks) with no deploy. `ensure_default_schedules()` creates a default
that is missing, by name, and never touches one that exists: an interval ops changed or a job
ops disabled stays as ops left it. It runs after every `migrate` (post_migrate, connected in
sync/apps.py) and from `python manage.py lat_schedules`.

A default that ops delete comes back on the next migrate: to stop a job, disable it.
"""

from __future__ import annotations

import json
import logging
import sys
from dataclasses import dataclass

from django.db import DEFAULT_DB_ALIAS, connections, router, transaction
from django_celery_beat.models import IntervalSchedule, PeriodicTask

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class DefaultSchedule:
    name: str
    task: str
    every: int  # seconds
    description: str


DEFAULT_SCHEDULES: tuple[DefaultSchedule, ...] = (
    DefaultSchedule(
        name="lat-state-refresh",
        task="lats.tasks.refresh_all_lat_states",
        every=60,
        description="Each LAT's state, tokens, staker nodes and operators (one task per LAT).",
    ),
    DefaultSchedule(
        name="lat-deposit-indexing",
        task="deposits.tasks.index_all_deposits",
        every=30,
        description="New deposit events of each LAT, up to the confirmed head.",
    ),
    DefaultSchedule(
        name="avs-metadata-refresh",
        task="lats.tasks.refresh_all_avs_metadata",
        every=6 * 3600,
        description="Curated AVS metadata from the latest metadata document (staff edits kept).",
    ),
    DefaultSchedule(
        name="lat-metric-snapshots",
        task="metrics.tasks.record_all_snapshots",
        every=3600,
        description="Hourly metric snapshot of each LAT (history and APY).",
    ),
    DefaultSchedule(
        name="push-outbox-retention",
        task="webhooks.tasks.prune_push_outbox",
        every=3600,
        description="Deletes the push feed's events older than PUSH_RETENTION_DAYS (webhooks "
        "and live stream; a stream cursor before them gets a reset).",
    ),
    DefaultSchedule(
        name="push-delivery-retention",
        task="webhooks.tasks.prune_push_deliveries",
        every=3600,
        description="Deletes webhook deliveries, with their attempts and history, older than "
        "DELIVERY_RETENTION_DAYS.",
    ),
)


def _interval(every: int, *, using: str) -> IntervalSchedule:
    # IntervalSchedule has no unique key: reuse the first matching row, create one if none.
    existing = (
        IntervalSchedule.objects.using(using)
        .filter(every=every, period=IntervalSchedule.SECONDS)
        .order_by("id")
        .first()
    )
    if existing is not None:
        return existing
    return IntervalSchedule.objects.using(using).create(
        every=every, period=IntervalSchedule.SECONDS
    )


def ensure_default_schedules(*, using: str = DEFAULT_DB_ALIAS) -> list[str]:
    """Create the default periodic tasks that do not exist (by name); returns their names."""
    created = []
    for default in DEFAULT_SCHEDULES:
        if PeriodicTask.objects.using(using).filter(name=default.name).exists():
            continue
        with transaction.atomic(using=using):
            _, was_created = PeriodicTask.objects.using(using).get_or_create(
                name=default.name,
                defaults={
                    "task": default.task,
                    "interval": _interval(default.every, using=using),
                    "args": json.dumps([]),
                    "kwargs": json.dumps({}),
                    # A run that waited a whole interval is superseded by the next one.
                    "expire_seconds": default.every,
                    "description": default.description,
                },
            )
        if was_created:
            created.append(default.name)
            logger.info("Created the default schedule %s (every %s s)", default.name, default.every)
    return created


def ensure_default_schedules_after_migrate(sender, *, using: str = DEFAULT_DB_ALIAS, **kwargs):
    """post_migrate receiver: create the defaults once django-celery-beat's tables exist."""
    if not router.allow_migrate_model(using, PeriodicTask):
        return
    tables = set(connections[using].introspection.table_names())
    if not {PeriodicTask._meta.db_table, IntervalSchedule._meta.db_table} <= tables:
        return  # a partial migrate, before django_celery_beat's migrations
    created = ensure_default_schedules(using=using)
    if created and kwargs.get("verbosity", 1) >= 2:
        stdout = kwargs.get("stdout") or sys.stdout
        stdout.write(f"  Created default schedules: {', '.join(created)}\n")
