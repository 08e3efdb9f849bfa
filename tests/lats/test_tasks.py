"""The refresh tasks, their advisory lock, and the default schedules in django-celery-beat.

Tasks run in-process with `.apply()` (a real Celery request, eager); tests/e2e/test_celery.py
runs them in a real worker under a real beat.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.management import call_command
from django.core.management.sql import emit_post_migrate_signal
from django.db import connection
from django_celery_beat.models import IntervalSchedule, PeriodicTask
from django_celery_beat.schedulers import DatabaseScheduler

from deposits.models import Deposit
from deposits.tasks import index_deposits
from devchain.devnet import DEMO_LATS
from lats.models import Avs, Lat, SyncStatus
from lats.tasks import refresh_avs_metadata, refresh_lat_state
from latsite.celery import app as celery_app
from latsite.locks import _cache_lock, advisory_lock, lock_key
from latsite.schedules import DEFAULT_SCHEDULES, ensure_default_schedules
from metrics.models import MetricSnapshot
from metrics.tasks import record_snapshot
from tests.chainreads import chain_deposit_count
from tests.lockholder import Holder

pytestmark = pytest.mark.django_db


# --- helpers ----------------------------------------------------------------------------------


def acquired_elsewhere(name: str, *ids: object) -> bool:
    """Whether another connection (another thread's) gets the lock right now."""
    with Holder(name, *ids) as holder:
        return bool(holder.acquired)


# --- the lock ---------------------------------------------------------------------------------


def test_lock_key_depends_on_name_and_ids():
    assert lock_key("job", 1) == lock_key("job", 1)
    keys = {lock_key("job", 1), lock_key("job", 2), lock_key("other", 1), lock_key("job", 1, 2)}
    assert len(keys) == 4
    assert all(-(2**63) <= key < 2**63 for key in keys)


def test_second_holder_on_another_connection_is_refused():
    with advisory_lock("job", 7) as acquired:
        assert acquired is True
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted "
                "AND pid = pg_backend_pid()"
            )
            assert cursor.fetchone()[0] == 1
        assert acquired_elsewhere("job", 7) is False
        assert acquired_elsewhere("job", 8) is True  # another LAT
        assert acquired_elsewhere("other-job", 7) is True  # another job
    assert acquired_elsewhere("job", 7) is True  # released


def test_lock_is_released_when_the_block_raises():
    with pytest.raises(RuntimeError), advisory_lock("job", 9):
        raise RuntimeError("boom")
    assert acquired_elsewhere("job", 9) is True


def test_holder_elsewhere_keeps_this_connection_out():
    with Holder("job", 10) as holder:
        assert holder.acquired is True
        with advisory_lock("job", 10) as acquired:
            assert acquired is False
    with advisory_lock("job", 10) as acquired:
        assert acquired is True


def test_cache_lock_used_off_postgresql():
    key = lock_key("cache-job", 1)
    with _cache_lock(key) as first:
        with _cache_lock(key) as second:
            assert (first, second) == (True, False)
    with _cache_lock(key) as again:
        assert again is True


# --- the per-LAT tasks ------------------------------------------------------------------------


@pytest.mark.chain
def test_tasks_refresh_the_lat_from_the_chain(imported):
    chain = imported
    manifest = chain.lat("latETH")
    spec = next(s for s in DEMO_LATS if s.symbol == "latETH")
    lat = Lat.objects.get(proxy_address=manifest["proxyAddress"])
    lt = chain.contract("LiquidToken", manifest["proxyAddress"])

    state = refresh_lat_state.apply(args=[lat.id])
    assert state.state == "SUCCESS", state.traceback
    assert state.result["status"] == "done"
    assert state.result["block"] == chain.w3.eth.block_number
    lat.refresh_from_db()
    assert int(lat.total_supply) == lt.functions.totalSupply().call()
    assert int(lat.total_assets) == lt.functions.totalAssets().call()

    metadata = refresh_avs_metadata.apply(args=[lat.id])
    assert metadata.result["status"] == "done", metadata.traceback
    assert Avs.objects.get(pk=lat.avs_id).metadata_name == spec.avs_metadata["name"]

    deposits = index_deposits.apply(args=[lat.id])
    assert deposits.result["status"] == "done", deposits.traceback
    expected = chain_deposit_count(chain, manifest)
    assert expected > 0
    assert deposits.result["new"] == expected
    assert Deposit.objects.filter(lat=lat).count() == expected

    snapshot = record_snapshot.apply(args=[lat.id])
    assert snapshot.result["status"] == "done", snapshot.traceback
    row = MetricSnapshot.objects.get(lat=lat)
    assert int(row.total_supply) == lt.functions.totalSupply().call()
    assert row.total_users == len(
        {log["args"]["sender"] for log in lt.events.AssetDeposited.get_logs(from_block=0)}
        | {log["args"]["sender"] for log in lt.events.Deposit.get_logs(from_block=0)}
    )

    statuses = SyncStatus.objects.filter(lat=lat)
    assert {s.job for s in statuses} == {"state", "metadata", "deposits", "snapshot"}
    assert all(s.last_success_at and not s.consecutive_failures for s in statuses)


@pytest.mark.chain
def test_tasks_are_safe_to_run_twice(imported):
    lat = Lat.objects.get(proxy_address=imported.lat("latBTC")["proxyAddress"])
    first = index_deposits.apply(args=[lat.id]).result
    second = index_deposits.apply(args=[lat.id]).result
    assert first["new"] == chain_deposit_count(imported, imported.lat("latBTC")) > 0
    assert second["new"] == 0
    assert Deposit.objects.filter(lat=lat).count() == first["new"]
    refresh_lat_state.apply(args=[lat.id])
    again = refresh_lat_state.apply(args=[lat.id]).result
    assert again["changed"] == 0
    record_snapshot.apply(args=[lat.id])
    record_snapshot.apply(args=[lat.id])
    assert MetricSnapshot.objects.filter(lat=lat).count() == 1


# --- the default schedules --------------------------------------------------------------------

NAMES = [d.name for d in DEFAULT_SCHEDULES]


def test_migrate_created_the_default_schedules():
    """post_migrate (lats/apps.py) ran ensure_default_schedules when the test DB was built."""
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
