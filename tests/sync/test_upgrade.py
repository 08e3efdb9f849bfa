"""What a running deployment keeps across the move of the code into its floors (core, chain,
activity, sync): the Celery task names its schedules store, and its tables with their rows."""

from __future__ import annotations

import datetime as dt

import pytest
from django_celery_beat.models import IntervalSchedule, PeriodicTask

from latsite.celery import app as celery_app
from tests import factories as f
from tests.migrating import leaves, migrate

# The task names the release before the move (e4ee1f7) defined, as ops' schedules and queued
# messages hold them.
RELEASED_TASK_NAMES = (
    "lats.tasks.refresh_lat_state",
    "lats.tasks.refresh_avs_metadata",
    "lats.tasks.refresh_all_lat_states",
    "lats.tasks.refresh_all_avs_metadata",
    "deposits.tasks.index_deposits",
    "deposits.tasks.index_all_deposits",
    "metrics.tasks.record_snapshot",
    "metrics.tasks.record_all_snapshots",
)
# That release's migrations, the newest of each app.
RELEASED_MIGRATIONS = [
    ("lats", "0005_chain_head_oracle"),
    ("operators", "0001_initial"),
    ("metrics", "0004_snapshot_ever_holders"),
    ("deposits", "0006_deposit_span_totals"),
]


@pytest.mark.django_db
def test_the_schedules_ops_stored_name_tasks_that_still_exist():
    """A schedule row as the released code wrote it (by name) still names a registered task,
    and beat's scheduler builds its entry."""
    from django_celery_beat.schedulers import DatabaseScheduler

    celery_app.loader.import_default_modules()
    every = IntervalSchedule.objects.create(every=5, period=IntervalSchedule.SECONDS)
    for name in RELEASED_TASK_NAMES:
        assert name in celery_app.tasks, name
        PeriodicTask.objects.create(name=f"ops: {name}", task=name, interval=every)
    schedule = DatabaseScheduler(app=celery_app, lazy=True).all_as_schedule()
    assert {schedule[f"ops: {name}"].task for name in RELEASED_TASK_NAMES} == set(
        RELEASED_TASK_NAMES
    )


@pytest.mark.django_db(transaction=True)
@pytest.mark.xdist_group("migrations")
def test_rows_written_by_the_released_schema_read_the_same(api):
    """Rows written through the released migrations' models (the tables as that release had
    them) are served the same by this code once the database is migrated."""
    old = migrate(RELEASED_MIGRATIONS)
    try:
        avs = old.get_model("lats", "Avs").objects.create(chain_id=31337, address=f.address(0xA7))
        lat = old.get_model("lats", "Lat").objects.create(
            chain_id=31337,
            proxy_address=f.address(0x1007),
            implementation_address=f.address(0x2007),
            name="Upgraded LAT",
            symbol="upLAT",
            avs_id=avs.id,
            base_asset="0xbeaC0eeEeeeeEEeEeEEEEeeEEeEeeeEeeEEBEaC0",
            max_nodes=3,
            contract_deployments={"implementation": {}, "proxy": {}},
            unit_eth_price=10**18,
        )
        at = dt.datetime(2026, 11, 1, 12, 0, tzinfo=dt.UTC)
        old.get_model("deposits", "Event").objects.create(
            lat_id=lat.id,
            block_number=41,
            log_index=2,
            tx_hash="0x" + "ab" * 32,
            block_hash="0x" + "cd" * 32,
            created_at=at,
            type="paused",
            args={"account": f.address(0xBEEF)},
        )
        migrate(leaves())

        detail = api.get(f"/lat/{f.address(0x1007)}").json()
        assert (detail["name"], detail["symbol"], detail["maxNodes"]) == (
            "Upgraded LAT",
            "upLAT",
            3,
        )
        events = api.get(f"/lat/{f.address(0x1007)}/events").json()["data"]
        assert [
            (e["type"], e["blockNumber"], e["logIndex"], e["transactionHash"]) for e in events
        ] == [("paused", 41, 2, "0x" + "ab" * 32)]
        assert events[0]["args"] == {"account": f.address(0xBEEF)}
    finally:
        migrate(leaves())
