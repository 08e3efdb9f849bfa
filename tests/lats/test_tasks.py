"""The refresh tasks against the devnet: each per-LAT task (lats', deposits', metrics') stores
what the chain says, and running them again changes nothing.

Tasks run in-process with `.apply()` (a real Celery request, eager); tests/e2e/test_celery.py
runs them in a real worker under a real beat.
"""

from __future__ import annotations

import pytest

from deposits.models import Deposit
from devchain.devnet import DEMO_LATS
from lats.models import Avs, Lat, SyncStatus
from metrics.models import MetricSnapshot
from sync.tasks import index_deposits, record_snapshot, refresh_avs_metadata, refresh_lat_state
from tests.chainreads import chain_deposit_count

pytestmark = pytest.mark.django_db


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
    # Holders: the addresses any Transfer credited whose balance on the chain is above zero.
    credited = {log["args"]["to"] for log in lt.events.Transfer.get_logs(from_block=0)}
    holding = {a for a in credited if lt.functions.balanceOf(a).call() > 0}
    assert len(holding) > 0
    assert row.total_users == len(holding)
    assert row.ever_holders == len(credited)

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
