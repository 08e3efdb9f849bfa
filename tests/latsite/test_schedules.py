"""The default schedules in django-celery-beat (sync/schedules.py): created by migrate, naming
registered tasks, created once, never undoing what ops changed, and followed by beat."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.management import call_command
from django.core.management.sql import emit_post_migrate_signal
from django_celery_beat.models import IntervalSchedule, PeriodicTask
from django_celery_beat.schedulers import DatabaseScheduler

from latsite.celery import app as celery_app
from sync.schedules import DEFAULT_SCHEDULES, ensure_default_schedules

pytestmark = pytest.mark.django_db

NAMES = [d.name for d in DEFAULT_SCHEDULES]


def test_migrate_created_the_default_schedules():
    """post_migrate (sync/apps.py) ran ensure_default_schedules when the test DB was built."""
    assert sorted(PeriodicTask.objects.filter(name__in=NAMES).values_list("name", flat=True)) == (
        sorted(NAMES)
    )


def test_default_schedules_name_registered_tasks():
    celery_app.loader.import_default_modules()
    for default in DEFAULT_SCHEDULES:
        assert default.task in celery_app.tasks, default.task


def test_ensure_default_schedules_is_idempotent():
    PeriodicTask.objects.all().delete()
    assert ensure_default_schedules() == NAMES
    rows = list(PeriodicTask.objects.order_by("name").values())
    assert ensure_default_schedules() == []
    assert list(PeriodicTask.objects.order_by("name").values()) == rows
    seconds = {t.name: t.interval.every for t in PeriodicTask.objects.select_related("interval")}
    assert seconds == {
        "lat-state-refresh": 60,
        "lat-deposit-indexing": 30,
        "avs-metadata-refresh": 6 * 3600,
        "lat-metric-snapshots": 3600,
        "push-outbox-retention": 3600,
        "push-delivery-retention": 3600,
    }


def test_ensure_default_schedules_keeps_what_ops_changed():
    ensure_default_schedules()
    # Ops, in admin: disable the metadata job, run state every 5 minutes, delete snapshots.
    metadata = PeriodicTask.objects.get(name="avs-metadata-refresh")
    metadata.enabled = False
    metadata.save()
    state = PeriodicTask.objects.get(name="lat-state-refresh")
    state.interval = IntervalSchedule.objects.create(every=300, period=IntervalSchedule.SECONDS)
    state.save()
    PeriodicTask.objects.filter(name="lat-metric-snapshots").delete()

    assert ensure_default_schedules() == ["lat-metric-snapshots"]  # only the missing one
    assert PeriodicTask.objects.get(name="avs-metadata-refresh").enabled is False
    assert PeriodicTask.objects.get(name="lat-state-refresh").interval.every == 300
    emit_post_migrate_signal(verbosity=0, interactive=False, db="default")  # after a migrate
    assert PeriodicTask.objects.get(name="avs-metadata-refresh").enabled is False
    assert PeriodicTask.objects.get(name="lat-state-refresh").interval.every == 300


def test_beat_schedule_follows_ops_edits():
    ensure_default_schedules()
    scheduler = DatabaseScheduler(app=celery_app, lazy=True)
    try:
        schedule = scheduler.all_as_schedule()
        assert set(NAMES) <= set(schedule)
        assert schedule["lat-deposit-indexing"].schedule.run_every == timedelta(seconds=30)
        assert schedule["lat-deposit-indexing"].task == "deposits.tasks.index_all_deposits"

        deposits = PeriodicTask.objects.get(name="lat-deposit-indexing")
        deposits.interval = IntervalSchedule.objects.create(
            every=2, period=IntervalSchedule.MINUTES
        )
        deposits.save()
        metadata = PeriodicTask.objects.get(name="avs-metadata-refresh")
        metadata.enabled = False
        metadata.save()

        schedule = scheduler.all_as_schedule()
        assert schedule["lat-deposit-indexing"].schedule.run_every == timedelta(minutes=2)
        assert "avs-metadata-refresh" not in schedule
    finally:
        scheduler._finalize.cancel()


def test_lat_schedules_command_prints_what_it_created(capsys):
    PeriodicTask.objects.filter(name="lat-deposit-indexing").delete()
    call_command("lat_schedules")
    out = capsys.readouterr().out
    assert "created lat-deposit-indexing" in out
    assert "lat-state-refresh: lats.tasks.refresh_all_lat_states" in out
    call_command("lat_schedules")
    assert "nothing created" in capsys.readouterr().out
