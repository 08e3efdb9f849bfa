"""GET /internal/metrics: the Prometheus exposition (django-prometheus' metrics and the service's
own), for METRICS_ALLOWED_IPS only; the lag gauges read from the sync status rows at scrape
time; the RPC, job and rate-limit counters of the process (or of every process, in
prometheus_client's multiprocess mode)."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator

import pytest
from django.db import connection
from django.test import Client
from django.utils import timezone
from drf_spectacular.generators import SchemaGenerator
from prometheus_client.parser import text_string_to_metric_families
from rest_framework_api_key.models import APIKey

from chain.errors import ChainUnavailable
from chain.gateway import gateway_for
from core import telemetry
from devchain.anvil import AnvilNode, start_anvil
from lats.models import SyncStatus
from sync.jobs import Step, run_step
from sync.tasks import STATE_JOB, refresh_lat_state
from tests import factories as f
from tests.lockholder import Holder
from tests.ports import closed_port_url

pytestmark = pytest.mark.django_db

URL = "/internal/metrics"

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(address: str = "127.0.0.1") -> Samples:
    response = Client(REMOTE_ADDR=address).get(URL)
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain; version=0.0.4")
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(response.content.decode())
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    """A sample's value; 0 for a counter child not created yet."""
    return samples.get((name, frozenset(labels.items())), 0.0)


def delta(before: Samples, after: Samples, name: str, **labels: str) -> float:
    return value(after, name, **labels) - value(before, name, **labels)


def since(name: str, when: dt.datetime) -> dict:
    """A succeeded sync status row's fields."""
    return {"job": name, "last_success_at": when, "last_error": "", "consecutive_failures": 0}


@pytest.fixture
def ip() -> str:
    """A client address of the test's own, so that rate-limit counters never meet."""
    n = uuid.uuid4().int
    return f"10.{n % 250}.{(n >> 8) % 250}.{(n >> 16) % 250}"


# --- who may read it ------------------------------------------------------------------------


@pytest.mark.parametrize("address", ["127.0.0.1", "::1", "::ffff:127.0.0.1"])
def test_loopback_reads_the_exposition(address):
    samples = scrape(address)
    names = {name for name, _ in samples}
    # django-prometheus' middlewares count requests (this one is counted after its response).
    assert "django_http_requests_before_middlewares_total" in names
    assert "python_info" in names or "process_cpu_seconds_total" in names


def test_the_exposition_documents_the_service_metrics():
    body = Client().get(URL).content.decode()
    for name in (
        "lat_rpc_requests_total",
        "lat_rpc_errors_total",
        "lat_rpc_duration_seconds",
        "lat_job_runs_total",
        "lat_job_failures_total",
        "lat_job_duration_seconds",
        "lat_rate_limit_rejections_total",
        "lat_chain_head_block",
        "lat_sync_lag_blocks",
        "lat_sync_lag_seconds",
        "lat_sync_last_success_timestamp_seconds",
        "lat_sync_consecutive_failures",
    ):
        assert f"# HELP {name.removesuffix('_total')} " in body or f"# HELP {name} " in body


@pytest.mark.parametrize("address", ["10.0.0.1", "192.168.1.5", "2001:db8::1"])
def test_other_addresses_get_a_403_in_the_error_body(address):
    response = Client(REMOTE_ADDR=address).get(URL)
    assert response.status_code == 403
    assert response["Content-Type"] == "application/json"
    error = response.json()["error"]
    assert error["code"] == "forbidden"
    assert error["doc_url"].endswith("/errors#forbidden")
    assert b"lat_" not in response.content


def test_allowed_networks_come_from_the_setting(settings):
    settings.METRICS_ALLOWED_IPS = ["10.0.0.0/8", "2001:db8::/32"]
    assert Client(REMOTE_ADDR="10.200.3.4").get(URL).status_code == 200
    assert Client(REMOTE_ADDR="2001:db8::7").get(URL).status_code == 200
    assert Client(REMOTE_ADDR="127.0.0.1").get(URL).status_code == 403
    assert Client(REMOTE_ADDR="11.0.0.1").get(URL).status_code == 403


def test_x_forwarded_for_is_ignored_without_trusted_proxies():
    response = Client(REMOTE_ADDR="10.0.0.1", HTTP_X_FORWARDED_FOR="127.0.0.1").get(URL)
    assert response.status_code == 403


def test_behind_a_trusted_proxy_the_forwarded_client_is_checked(settings):
    """A reverse proxy on loopback (NUM_PROXIES=1) does not open the metrics to the world."""
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "NUM_PROXIES": 1}
    public = Client(REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR="203.0.113.9")
    assert public.get(URL).status_code == 403
    local = Client(REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR="127.0.0.1")
    assert local.get(URL).status_code == 200
    assert Client(REMOTE_ADDR="127.0.0.1").get(URL).status_code == 200  # a direct scrape


def test_scraped_over_plain_http_even_where_https_is_enforced(settings):
    settings.SECURE_SSL_REDIRECT = True
    assert Client().get(URL).status_code == 200
    assert Client().get("/lat").status_code == 301  # the API itself still redirects


def test_only_get_and_head():
    response = Client().post(URL)
    assert response.status_code == 405
    assert response.json()["error"]["code"] == "bad_request"
    assert Client().head(URL).status_code == 200


def test_not_in_the_openapi_schema():
    paths = SchemaGenerator().get_schema(request=None, public=True)["paths"]
    assert not [path for path in paths if "internal" in path]


def test_the_api_metrics_path_is_not_the_exposition():
    response = Client().get("/metrics")
    assert b"# HELP" not in response.content


# --- lag gauges, from the database at scrape time ----------------------------------------------


def test_lag_gauges_are_read_from_the_sync_status_rows():
    now = timezone.now()
    ago = lambda seconds: now - dt.timedelta(seconds=seconds)  # noqa: E731
    one = f.LatFactory(chain_id=1, symbol="ONE")
    two = f.LatFactory(chain_id=1, symbol="TWO")
    other = f.LatFactory(chain_id=17000, symbol="HOL")
    SyncStatus.objects.create(lat=one, last_block=1000, **since("state", ago(120)))
    SyncStatus.objects.create(lat=one, last_block=988, **since("deposits", ago(60)))
    SyncStatus.objects.create(
        lat=two, job="state", last_block=990, last_success_at=ago(7200), consecutive_failures=4
    )
    SyncStatus.objects.create(lat=two, job="metadata", consecutive_failures=3)  # never succeeded
    SyncStatus.objects.create(lat=other, last_block=55, **since("state", now))

    samples = scrape()

    def labels(lat, sync):
        return {"chain": str(lat.chain_id), "lat": lat.proxy_address, "symbol": lat.symbol} | {
            "sync": sync
        }

    assert value(samples, "lat_chain_head_block", chain="1") == 1000
    assert value(samples, "lat_chain_head_block", chain="17000") == 55
    assert value(samples, "lat_sync_lag_blocks", **labels(one, "state")) == 0
    assert value(samples, "lat_sync_lag_blocks", **labels(one, "deposits")) == 12
    assert value(samples, "lat_sync_lag_blocks", **labels(two, "state")) == 10
    assert value(samples, "lat_sync_lag_blocks", **labels(other, "state")) == 0
    last = value(samples, "lat_sync_last_success_timestamp_seconds", **labels(one, "state"))
    assert last == pytest.approx(ago(120).timestamp(), abs=1e-3)
    assert 120 <= value(samples, "lat_sync_lag_seconds", **labels(one, "state")) < 130
    assert 7200 <= value(samples, "lat_sync_lag_seconds", **labels(two, "state")) < 7210
    assert value(samples, "lat_sync_consecutive_failures", **labels(two, "state")) == 4
    assert value(samples, "lat_sync_consecutive_failures", **labels(two, "metadata")) == 3
    # A job that never succeeded has no block, lag or success time.
    never = frozenset(labels(two, "metadata").items())
    assert ("lat_sync_lag_blocks", never) not in samples
    assert ("lat_sync_lag_seconds", never) not in samples


@pytest.mark.django_db(transaction=True)
def test_without_the_database_the_rest_is_still_served():
    """The lag gauges need the database; the process-local counters do not."""
    telemetry.rate_limit_rejected("anon")
    name = connection.settings_dict["NAME"]
    connection.close()
    connection.settings_dict["NAME"] = "lat_prom_no_such_database"
    try:
        samples = scrape()
    finally:
        connection.close()
        connection.settings_dict["NAME"] = name
    assert value(samples, "lat_sync_status_up") == 0
    assert value(samples, "lat_rate_limit_rejections_total", scope="anon") >= 1
    assert not [key for key in samples if key[0] == "lat_chain_head_block"]
    assert value(scrape(), "lat_sync_status_up") == 1


# --- job runs ------------------------------------------------------------------------------------


def test_job_runs_are_counted_by_task_and_status(dataset, settings):
    settings.RPC_URL = closed_port_url()
    lat = dataset.eth_lat
    before = scrape()
    refresh_lat_state.apply(args=[987654])  # no such LAT
    with Holder(STATE_JOB, lat.id):
        refresh_lat_state.apply(args=[lat.id])  # skipped
    after = scrape()

    assert delta(before, after, "lat_job_runs_total", task=STATE_JOB, status="missing") == 1
    assert delta(before, after, "lat_job_runs_total", task=STATE_JOB, status="skipped") == 1
    assert delta(before, after, "lat_job_runs_total", task=STATE_JOB, status="done") == 0
    assert delta(before, after, "lat_job_duration_seconds_count", task=STATE_JOB) == 2
    for status in ("missing", "skipped"):
        assert delta(before, after, "lat_job_failures_total", task=STATE_JOB, status=status) == 0


def test_a_run_that_raises_is_counted_as_a_failure(dataset):
    def unreachable(lat):
        raise ChainUnavailable("the node could not be reached (ConnectionError)")

    def broken(lat):
        raise RuntimeError("a bug")

    before = scrape()
    with pytest.raises(ChainUnavailable):
        run_step(Step("tests.unreachable", "state", unreachable), dataset.eth_lat.id)
    with pytest.raises(RuntimeError):
        run_step(Step("tests.broken", "state", broken), dataset.eth_lat.id)
    after = scrape()
    for task, status in (("tests.unreachable", "unavailable"), ("tests.broken", "error")):
        for name in ("lat_job_runs_total", "lat_job_failures_total"):
            assert delta(before, after, name, task=task, status=status) == 1
        assert delta(before, after, "lat_job_duration_seconds_count", task=task) == 1
    # The sync status gauge shows the same failures, read from the database.
    lat = dataset.eth_lat
    labels = {"chain": str(lat.chain_id), "lat": lat.proxy_address, "symbol": lat.symbol}
    assert value(after, "lat_sync_consecutive_failures", **labels, sync="state") == 2


# --- rate limits ---------------------------------------------------------------------------------


def rejections(scope: str) -> float:
    return value(scrape(), "lat_rate_limit_rejections_total", scope=scope)


def test_rate_limit_rejections_are_counted_by_scope(settings, ip, minute_window):
    settings.RATE_LIMIT_ANON = "2/min"
    settings.RATE_LIMIT_KEYED = "1/min"
    _, key = APIKey.objects.create_key(name="dashboard")
    before = {scope: rejections(scope) for scope in ("anon", "keyed", "bad-key")}
    client = Client(REMOTE_ADDR=ip)
    assert [client.get("/lat").status_code for _ in range(3)] == [200, 200, 429]
    keyed = [client.get("/lat", HTTP_X_API_TOKEN=key).status_code for _ in range(2)]
    assert keyed == [200, 429]
    assert rejections("anon") - before["anon"] == 1
    assert rejections("keyed") - before["keyed"] == 1
    # Bad keys: RATE_LIMIT_ANON of them per address, then 429 before any lookup.
    other = Client(REMOTE_ADDR=ip.rsplit(".", 1)[0] + ".251")
    codes = [other.get("/lat", HTTP_X_API_TOKEN="nope.nope").status_code for _ in range(3)]
    assert codes == [401, 401, 429]
    assert rejections("bad-key") - before["bad-key"] == 1


# --- RPC ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def node() -> Iterator[AnvilNode]:
    """A bare anvil of the test's own (chain id 31337)."""
    anvil = start_anvil(reuse=False)
    yield anvil
    anvil.stop()


def test_rpc_requests_errors_and_latency_by_chain_and_method(node, settings):
    settings.RPC_URL = node.url
    before = scrape()
    head = gateway_for(node.chain_id).head()  # eth_blockNumber, then eth_getBlockByNumber
    settings.RPC_URL = closed_port_url()
    with pytest.raises(ChainUnavailable):
        gateway_for(node.chain_id).head()
    after = scrape()

    def rpc(name: str, method: str, **labels: str) -> float:
        return delta(before, after, name, chain=str(node.chain_id), method=method, **labels)

    assert head.number == 0
    assert rpc("lat_rpc_requests_total", "eth_blockNumber") == 2
    assert rpc("lat_rpc_requests_total", "eth_getBlockByNumber") == 1
    assert rpc("lat_rpc_errors_total", "eth_blockNumber", kind="unreachable") == 1
    assert rpc("lat_rpc_errors_total", "eth_getBlockByNumber", kind="unreachable") == 0
    assert rpc("lat_rpc_duration_seconds_count", "eth_blockNumber") == 2
    assert rpc("lat_rpc_duration_seconds_count", "eth_getBlockByNumber") == 1
    assert rpc("lat_rpc_duration_seconds_sum", "eth_blockNumber") > 0
    body = Client().get(URL).content.decode()
    assert node.url not in body
    assert f":{node.port}" not in body


def test_batches_count_each_request_and_time_the_round_trip(node, settings):
    settings.RPC_URL = node.url
    before = scrape()
    gateway_for(node.chain_id).blocks([0, 5], missing_ok=True)  # block 5 does not exist yet
    after = scrape()

    def rpc(name: str, method: str) -> float:
        return delta(before, after, name, chain=str(node.chain_id), method=method)

    assert rpc("lat_rpc_requests_total", "eth_getBlockByNumber") == 2
    assert rpc("lat_rpc_duration_seconds_count", "batch") == 1
    assert rpc("lat_rpc_duration_seconds_count", "eth_getBlockByNumber") == 0


# --- multiprocess mode ---------------------------------------------------------------------------

_WORKER = """
from core import telemetry
telemetry.rate_limit_rejected("simulate")
telemetry.rate_limit_rejected("simulate")
telemetry.job_finished("tests.elsewhere", "failed", 0.5)
"""


def test_multiprocess_mode_adds_up_every_process(tmp_path, monkeypatch):
    """With PROMETHEUS_MULTIPROC_DIR set, a scrape answers what other processes (a gunicorn
    worker, a Celery worker) counted, and still computes the lag from the database."""
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    for _ in range(2):  # two processes
        subprocess.run([sys.executable, "-c", _WORKER], env=env, check=True, timeout=60)
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))
    lat = f.LatFactory(chain_id=5, symbol="MP")
    SyncStatus.objects.create(lat=lat, job="state", last_block=7, last_success_at=timezone.now())
    samples = scrape()
    assert value(samples, "lat_rate_limit_rejections_total", scope="simulate") == 4
    assert value(samples, "lat_job_failures_total", task="tests.elsewhere", status="failed") == 2
    assert value(samples, "lat_job_duration_seconds_sum", task="tests.elsewhere") == 1.0
    assert value(samples, "lat_chain_head_block", chain="5") == 7
