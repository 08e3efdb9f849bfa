"""The job runner every per-LAT refresh task runs through (run_lat_job, the per-LAT task
options, fan_out): a run skips while another holds its lock, a LAT that is gone is missing,
an unreachable node is retried with backoff and anything else is not, an unusable metadata
document fails without a retry, what stops a run is recorded on the LAT's sync status, and
each fan-out task enqueues one task per LAT.

Tasks run in-process with `.apply()` (a real Celery request, eager); tests/e2e/test_celery.py
runs them in a real worker under a real beat.
"""

from __future__ import annotations

import pytest
from celery import signals

from chain.errors import ChainUnavailable
from lats.models import Lat, SyncStatus
from metrics.models import MetricSnapshot
from sync.jobs import LAT_TASK_OPTIONS
from sync.tasks import (
    DEPOSITS_JOB,
    METADATA_JOB,
    SNAPSHOT_JOB,
    STATE_JOB,
    index_all_deposits,
    index_deposits,
    record_all_snapshots,
    record_snapshot,
    refresh_all_avs_metadata,
    refresh_all_lat_states,
    refresh_avs_metadata,
    refresh_lat_state,
)
from tests import factories as f
from tests.lockholder import Holder
from tests.ports import closed_port_url

pytestmark = pytest.mark.django_db

MAX_RETRIES = LAT_TASK_OPTIONS["max_retries"]


@pytest.fixture
def retries():
    """The countdowns of the retries requested while the test runs."""
    seen: list[float] = []

    def on_retry(sender=None, reason=None, **kwargs):
        seen.append(reason.when)

    signals.task_retry.connect(on_retry, weak=False)
    yield seen
    signals.task_retry.disconnect(on_retry)


@pytest.mark.parametrize(
    ("task", "job"),
    [
        (refresh_lat_state, STATE_JOB),
        (refresh_avs_metadata, METADATA_JOB),
        (index_deposits, DEPOSITS_JOB),
        (record_snapshot, SNAPSHOT_JOB),
    ],
)
def test_task_skips_while_another_run_holds_its_lock(dataset, settings, task, job):
    settings.RPC_URL = closed_port_url()  # a run that got through would fail and say so
    lat = dataset.eth_lat
    with Holder(job, lat.id):
        result = task.apply(args=[lat.id])
    assert result.state == "SUCCESS"
    assert result.result == {"job": job, "lat": lat.id, "status": "skipped"}
    assert not SyncStatus.objects.exists()
    assert not MetricSnapshot.objects.exists()


def test_task_for_a_lat_that_no_longer_exists():
    result = refresh_lat_state.apply(args=[987654])
    assert result.result == {"job": STATE_JOB, "lat": 987654, "status": "missing"}


@pytest.mark.parametrize(
    ("task", "job"), [(refresh_lat_state, "state"), (index_deposits, "deposits")]
)
def test_unreachable_node_is_retried_with_backoff(dataset, settings, retries, task, job):
    settings.RPC_URL = closed_port_url()
    lat = dataset.eth_lat
    result = task.apply(args=[lat.id])
    # Eager retries run at once, one after another, until max_retries is spent.
    assert len(retries) == MAX_RETRIES
    for attempt, countdown in enumerate(retries):
        bound = min(LAT_TASK_OPTIONS["retry_backoff"] * 2**attempt, 300)
        assert 0 <= countdown <= bound  # exponential backoff with full jitter
    assert result.state == "FAILURE"
    assert isinstance(result.result, ChainUnavailable)
    status = SyncStatus.objects.get(lat=lat, job=job)
    assert status.consecutive_failures == MAX_RETRIES + 1
    assert status.last_success_at is None
    assert "ChainUnavailable" in status.last_error
    assert "127.0.0.1" not in status.last_error  # an RPC URL never leaks


def test_first_failure_requests_a_retry(dataset, settings, retries):
    """On the last allowed attempt the error stands; before it, the task asks for a retry."""
    settings.RPC_URL = closed_port_url()
    result = refresh_lat_state.apply(args=[dataset.eth_lat.id], retries=MAX_RETRIES - 1)
    assert len(retries) == 1
    assert result.state == "FAILURE"


@pytest.mark.chain
def test_other_errors_are_not_retried(imported, retries):
    # A LAT whose manifest lacks the coordinator: the refresh fails with a KeyError.
    lat = f.LatFactory(contract_deployments={"implementation": {}, "proxy": {}})
    result = refresh_lat_state.apply(args=[lat.id])
    assert result.state == "FAILURE"
    assert isinstance(result.result, KeyError)
    assert retries == []
    assert SyncStatus.objects.get(lat=lat, job="state").consecutive_failures == 1


@pytest.mark.chain
def test_unusable_metadata_document_is_logged_not_retried(imported, retries):
    manifest = imported.lat("latETH")
    # latETH's AVS is a ServiceManager: its owner announces the metadata through it.
    manager = imported.contract("ServiceManager", manifest["avsAddress"])
    tx = manager.functions.updateAVSMetadataURI("ipfs://not-fetched-here").transact(
        {"from": manager.functions.owner().call()}
    )
    imported.w3.eth.wait_for_transaction_receipt(tx)
    lat = Lat.objects.get(proxy_address=manifest["proxyAddress"])
    result = refresh_avs_metadata.apply(args=[lat.id])
    assert result.state == "SUCCESS"
    assert result.result["status"] == "failed"
    assert result.result["error"].startswith("MetadataUnavailable: unsupported metadata URI")
    assert retries == []
    assert SyncStatus.objects.get(lat=lat, job="metadata").consecutive_failures == 1


@pytest.mark.chain
@pytest.mark.parametrize(
    ("fan_out", "job"),
    [
        (refresh_all_lat_states, "state"),
        (index_all_deposits, "deposits"),
        (refresh_all_avs_metadata, "metadata"),
        (record_all_snapshots, "snapshot"),
    ],
)
def test_fan_out_runs_one_task_per_lat(imported, eager, fan_out, job):
    ids = sorted(Lat.objects.values_list("id", flat=True))
    assert len(ids) == len(imported.manifests)
    result = fan_out.apply()
    assert result.result == ids
    if job == "snapshot":
        assert sorted(MetricSnapshot.objects.values_list("lat_id", flat=True)) == ids
    done = SyncStatus.objects.filter(job=job, consecutive_failures=0)
    assert sorted(done.exclude(last_success_at=None).values_list("lat_id", flat=True)) == ids


def test_soft_time_limit_is_recorded_on_the_sync_status(dataset, monkeypatch):
    """A refresh stopped by the soft time limit leaves its reason for ops. (The limit cannot
    be made to strike at a chosen point of a real run, so the service raises it here.)"""
    from celery.exceptions import SoftTimeLimitExceeded

    import sync.refresh

    def too_slow(*, lat):
        raise SoftTimeLimitExceeded()

    monkeypatch.setattr(sync.refresh, "refresh_state", too_slow)
    with pytest.raises(SoftTimeLimitExceeded):
        refresh_lat_state.run(dataset.eth_lat.id)
    status = SyncStatus.objects.get(lat=dataset.eth_lat, job="state")
    assert "soft time limit" in status.last_error
    assert status.consecutive_failures == 1
