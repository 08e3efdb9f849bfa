"""GET /health and GET /version: every dependency named, faults made real (a redis-server of this
module's own stopped or paused, the database check pointed at a closed port or at a socket that
accepts connections and never answers), and an answer within a second whatever is down."""

from __future__ import annotations

import datetime as dt
import socket
import subprocess
import time
import tomllib
from pathlib import Path

import pytest
from django.db import connections
from django.utils import timezone

from chain.errors import ChainCallReverted, ChainUnavailable
from core import redisguard
from lats.models import PriceFeed, SyncStatus
from lats.sync_status import sync_status_failure
from tests import factories as f
from tests.ports import closed_port
from tests.redisserver import cache_settings

pytestmark = pytest.mark.django_db

A = f.address
BOUND = 1.0  # seconds: /health answers within a second whatever is down
REPO = Path(__file__).resolve().parents[2]
OK_DEPENDENCY = {"status": "ok", "error": None}


@pytest.fixture(autouse=True)
def own_redis(redis_server, settings):
    redis_server.ensure_running()
    settings.CACHES = cache_settings(redis_server, settings)
    settings.SYNC_LAG_ALERT_SECONDS = 300
    redisguard.breaker.reset()
    yield redis_server
    redis_server.ensure_running()
    redisguard.breaker.reset()


def timed_get(api, path: str):
    started = time.perf_counter()
    response = api.get(path)
    return response, time.perf_counter() - started


def iso(moment: dt.datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def synced(lat, job: str, *, block: int, at: dt.datetime) -> None:
    SyncStatus.objects.create(lat=lat, job=job, last_block=block, last_success_at=at)


@pytest.fixture
def world():
    """Two LATs on 31337 (one synced 20 s ago, one 10 s ago) and one on chain 1."""
    now = timezone.now().replace(microsecond=0)
    w = type("World", (), {})()
    w.now = now
    w.a = f.LatFactory(proxy_address=A(0x1001), symbol="aLAT", chain_id=31337)
    w.b = f.LatFactory(proxy_address=A(0x1002), symbol="bLAT", chain_id=31337)
    w.c = f.LatFactory(proxy_address=A(0x1003), symbol="cLAT", chain_id=1)
    w.a_at, w.b_at, w.c_at = now - dt.timedelta(seconds=20), now - dt.timedelta(seconds=10), now
    synced(w.a, "state", block=120, at=w.a_at)
    synced(w.a, "deposits", block=117, at=w.a_at)
    synced(w.b, "state", block=119, at=w.b_at)
    synced(w.b, "deposits", block=110, at=w.b_at)
    synced(w.c, "state", block=5000, at=w.c_at)
    synced(w.c, "deposits", block=4988, at=w.c_at)
    return w


def lat_entry(lat, *, indexed, lag_blocks, synced_at, status="ok") -> dict:
    return {
        "address": lat.proxy_address,
        "symbol": lat.symbol,
        "chainId": lat.chain_id,
        "status": status,
        "lastIndexedBlock": indexed,
        "lagBlocks": lag_blocks,
        "lastSyncedAt": iso(synced_at) if synced_at else None,
    }


WEBHOOKS_IDLE = {
    "status": "ok",
    "pendingDeliveries": 0,
    "pendingEvents": 0,
    "oldestPendingSeconds": 0,
}


def without_lag_seconds(body: dict) -> tuple[dict, list]:
    """The body with each LAT's lagSeconds taken out (the clock moves), and those values; each
    LAT's `gaps` are taken out too (test_gaps_say_what_the_service_cannot_know checks them)."""
    lags = [lat.pop("lagSeconds") for lat in body["checks"]["lats"]]
    for lat in body["checks"]["lats"]:
        lat.pop("gaps")
    return body, lags


def assert_lags(lags, expected_seconds) -> None:
    for lag, expected in zip(lags, expected_seconds, strict=True):
        assert expected <= lag <= expected + 2


def test_all_ok(api, world):
    response, took = timed_get(api, "/health")
    assert response.status_code == 200
    assert response["Cache-Control"] == "no-store"
    body, lags = without_lag_seconds(response.json())
    # 31337: the highest block of a success is a's state read at 120; its last run is b's (10 s
    # ago). Chain 1: 5000. Lags: 120 - 117, 120 - 110, 5000 - 4988.
    assert body == {
        "status": "ok",
        "checks": {
            "redis": OK_DEPENDENCY,
            "database": OK_DEPENDENCY,
            "chains": [
                {
                    "chainId": 1,
                    "status": "ok",
                    "lastHead": 5000,
                    "nodeAnswered": True,
                    "lastJobAt": iso(world.c_at),
                },
                {
                    "chainId": 31337,
                    "status": "ok",
                    "lastHead": 120,
                    "nodeAnswered": True,
                    "lastJobAt": iso(world.b_at),
                },
            ],
            "lats": [
                lat_entry(world.c, indexed=4988, lag_blocks=12, synced_at=world.c_at),
                lat_entry(world.a, indexed=117, lag_blocks=3, synced_at=world.a_at),
                lat_entry(world.b, indexed=110, lag_blocks=10, synced_at=world.b_at),
            ],
            "webhooks": WEBHOOKS_IDLE,
        },
    }
    assert_lags(lags, [0, 20, 10])
    assert took < BOUND


def test_without_redis_configured_there_is_no_redis_check(api, world, settings):
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    body = api.get("/health").json()
    assert body["status"] == "ok"
    assert set(body["checks"]) == {"database", "chains", "lats", "webhooks"}


@pytest.mark.parametrize("fault", ["stopped", "paused"])
def test_redis_down_is_degraded_within_a_second(api, world, own_redis, fault):
    own_redis.stop() if fault == "stopped" else own_redis.pause()
    response, took = timed_get(api, "/health")
    assert took < BOUND
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "degraded"
    assert body["checks"]["redis"]["status"] == "down"
    assert body["checks"]["database"] == OK_DEPENDENCY
    assert all(lat["status"] == "ok" for lat in body["checks"]["lats"])
    # The breaker is now open for the whole process: the next check does not even try.
    assert redisguard.breaker.is_open
    response, took = timed_get(api, "/health")
    assert took < 0.3
    assert response.json()["checks"]["redis"]["status"] == "down"
    # Redis back and the breaker's pause over: ok again.
    own_redis.ensure_running()
    redisguard.breaker.reset()
    assert api.get("/health").json()["status"] == "ok"


def test_a_lagging_lat_is_degraded_with_its_lag(api, world, settings):
    settings.SYNC_LAG_ALERT_SECONDS = 15  # a synced 20 s ago lags; b (10 s) and c (0 s) do not
    response = api.get("/health")
    assert response.status_code == 200
    body, lags = without_lag_seconds(response.json())
    assert body["status"] == "degraded"
    assert body["checks"]["lats"][1] == lat_entry(
        world.a, indexed=117, lag_blocks=3, synced_at=world.a_at, status="lagging"
    )
    assert [lat["status"] for lat in body["checks"]["lats"]] == ["ok", "lagging", "ok"]
    assert_lags(lags, [0, 20, 10])


def test_the_older_job_sets_the_lag_and_a_never_synced_lat_lags(api, world):
    # b's state read is an hour old while its deposits are fresh: the older one counts.
    hour_ago = world.now - dt.timedelta(hours=1)
    SyncStatus.objects.filter(lat=world.b, job="state").update(last_success_at=hour_ago)
    never = f.LatFactory(proxy_address=A(0x1004), symbol="dLAT", chain_id=31337)
    body, lags = without_lag_seconds(api.get("/health").json())
    assert body["status"] == "degraded"
    lats = {lat["symbol"]: lat for lat in body["checks"]["lats"]}
    assert lats["bLAT"]["status"] == "lagging"
    assert lats["bLAT"]["lastSyncedAt"] == iso(hour_ago)
    assert lats["dLAT"] == lat_entry(never, indexed=None, lag_blocks=None, synced_at=None) | {
        "status": "lagging"
    }
    # In the order of the body: cLAT (chain 1), then aLAT, bLAT, dLAT by address.
    assert list(lats) == ["cLAT", "aLAT", "bLAT", "dLAT"]
    assert_lags(lags[:3], [0, 20, 3600])
    assert lags[3] is None


def test_a_node_error_on_a_sync_status_is_a_down_chain(api, world):
    error = ChainUnavailable("the node could not be reached")
    sync_status_failure(lat=world.b, job="deposits", error=error)  # after every success
    response = api.get("/health")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "degraded"
    chains = {chain["chainId"]: chain for chain in body["checks"]["chains"]}
    failed_at = SyncStatus.objects.get(lat=world.b, job="deposits").last_error_at
    assert chains[31337] == {
        "chainId": 31337,
        "status": "down",
        "lastHead": 120,  # the last successes still count
        "nodeAnswered": False,
        "lastJobAt": iso(failed_at),
    }
    assert chains[1]["nodeAnswered"] is True


def test_an_error_the_node_answered_is_not_a_node_failure(api, world):
    sync_status_failure(lat=world.b, job="state", error=ChainCallReverted("execution reverted"))
    body = api.get("/health").json()
    assert body["status"] == "ok"
    assert {chain["chainId"]: chain["nodeAnswered"] for chain in body["checks"]["chains"]} == {
        1: True,
        31337: True,
    }


def _down_body(error: str) -> dict:
    return {
        "status": "down",
        "checks": {
            "redis": OK_DEPENDENCY,
            "database": {"status": "down", "error": error},
            "chains": None,
            "lats": None,
            "webhooks": None,
        },
    }


def test_database_refusing_connections_is_503_down_within_a_second(api, world, monkeypatch):
    settings_dict = connections["default"].settings_dict
    monkeypatch.setitem(settings_dict, "HOST", "127.0.0.1")
    monkeypatch.setitem(settings_dict, "PORT", closed_port())
    response, took = timed_get(api, "/health")
    assert took < BOUND
    assert response.status_code == 503
    assert response.json() == _down_body("unreachable (OperationalError)")


def test_database_never_answering_is_503_down_within_a_second(api, world, monkeypatch):
    # A socket that accepts connections (the kernel's backlog) and never says a word.
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        settings_dict = connections["default"].settings_dict
        monkeypatch.setitem(settings_dict, "HOST", "127.0.0.1")
        monkeypatch.setitem(settings_dict, "PORT", silent.getsockname()[1])
        response, took = timed_get(api, "/health")
        assert took < BOUND
        assert response.status_code == 503
        assert response.json() == _down_body("no answer within 0.6 s")
        # A second request waits on the same probe rather than starting another.
        response, took = timed_get(api, "/health")
        assert took < BOUND
        assert response.status_code == 503


def test_health_is_not_rate_limited_and_ignores_api_keys(api, world, settings, minute_window):
    settings.RATE_LIMIT_ANON = "1/min"
    for _ in range(3):
        response = api.get("/health", HTTP_X_API_TOKEN="not.a-key")
        assert response.status_code == 200
        assert "RateLimit-Remaining" not in response


def pyproject_version() -> str:
    with (REPO / "pyproject.toml").open("rb") as file:
        return tomllib.load(file)["project"]["version"]


def test_version_from_git_commit(api, monkeypatch):
    monkeypatch.setenv("GIT_COMMIT", "0123456789abcdef0123456789abcdef01234567")
    monkeypatch.setenv("SOURCE_COMMIT", "ignored-when-GIT_COMMIT-is-set")
    response = api.get("/version")
    assert response.status_code == 200
    assert response.json() == {
        "version": pyproject_version(),
        "commit": "0123456789abcdef0123456789abcdef01234567",
    }


def test_version_from_source_commit_then_the_checkout(api, monkeypatch):
    monkeypatch.delenv("GIT_COMMIT", raising=False)
    monkeypatch.setenv("SOURCE_COMMIT", "feedface")
    assert api.get("/version").json()["commit"] == "feedface"
    monkeypatch.delenv("SOURCE_COMMIT")
    head = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert api.get("/version").json() == {"version": pyproject_version(), "commit": head}


def test_version_without_a_checkout_is_unknown(api, monkeypatch, settings, tmp_path):
    monkeypatch.delenv("GIT_COMMIT", raising=False)
    monkeypatch.delenv("SOURCE_COMMIT", raising=False)
    settings.BASE_DIR = tmp_path
    assert api.get("/version").json()["commit"] == "unknown"


def test_gaps_say_what_the_service_cannot_know(api):
    token = A(0x70C)
    # Mainnet: EigenLayer's contracts are presets; the unit of account has no price feed yet.
    f.LatFactory(proxy_address=A(0x2001), symbol="tLAT", chain_id=1, base_asset=token)
    # A devnet naming its contracts itself: nothing missing.
    f.LatFactory(
        proxy_address=A(0x2002),
        symbol="dLAT",
        chain_id=31337,
        delegation_manager=A(0xD1),
        strategy_manager=A(0xD2),
        rewards_coordinator=A(0xD3),
        avs_directory=A(0xD4),
        allocation_manager=A(0xD5),
    )
    # A chain without a preset whose manifest named only the DelegationManager.
    f.LatFactory(proxy_address=A(0x2003), symbol="xLAT", chain_id=99, delegation_manager=A(0xD1))
    body = api.get("/health").json()
    gaps = {lat["symbol"]: lat["gaps"] for lat in body["checks"]["lats"]}
    assert gaps["tLAT"] == [
        f"no price feed for the unit of account {token}: its values in ETH are unknown until "
        "staff set one (admin: Price feeds)"
    ]
    assert gaps["dLAT"] == []
    none = "no preset for chain 99, no manifest eigenlayer.{}, no override"
    assert gaps["xLAT"] == [
        f"rewardsCoordinator unknown ({none.format('rewardsCoordinator')}): APY from AVS "
        "rewards and operator splits unknown",
        f"avsDirectory unknown ({none.format('avsDirectory')}): AVS metadata and the operators "
        "registered to the AVS (the rewards APY) unknown",
        f"allocationManager unknown ({none.format('allocationManager')}): AVS metadata of "
        "operator-set AVSs unknown",
    ]
    # Gaps do not make the service degraded: what is known is served.
    assert {lat["status"] for lat in body["checks"]["lats"]} == {"lagging"}
    PriceFeed.objects.create(chain_id=1, token_address=token, feed_address=A(0xFEED))
    body = api.get("/health").json()
    assert {lat["symbol"]: lat["gaps"] for lat in body["checks"]["lats"]}["tLAT"] == []


def test_a_webhook_dispatcher_behind_is_degraded(api, world, settings):
    """An event the dispatcher has not fanned out for longer than WEBHOOK_LAG_ALERT_SECONDS."""
    from webhooks.models import OutboxEvent

    settings.WEBHOOK_LAG_ALERT_SECONDS = 60
    event = OutboxEvent.objects.create(event_id="evt_1", type="deposit", payload={})
    OutboxEvent.objects.filter(id=event.id).update(
        created_at=dt.datetime.now(dt.UTC) - dt.timedelta(seconds=90)
    )
    response = api.get("/health")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "degraded"
    webhooks = body["checks"]["webhooks"]
    assert (webhooks["status"], webhooks["pendingEvents"]) == ("lagging", 1)
    assert 90 <= webhooks["oldestPendingSeconds"] <= 95


def test_only_deliveries_that_can_be_sent_are_a_webhook_backlog(api, world, settings):
    """Deliveries of a disabled endpoint, of a revoked key's and of an expired key's endpoints
    wait for them to be enabled again: none is a backlog (extensions.md, Retention). One due
    to an enabled endpoint of a valid key is."""
    from rest_framework_api_key.models import APIKey

    from webhooks.models import Delivery, Endpoint, OutboxEvent

    settings.WEBHOOK_LAG_ALERT_SECONDS = 60
    now = timezone.now()
    event = OutboxEvent.objects.create(
        event_id="evt_1", type="deposit", payload={}, fanned_out_at=now
    )
    valid, _ = APIKey.objects.create_key(name="valid")
    revoked, _ = APIKey.objects.create_key(name="revoked", revoked=True)
    expired, _ = APIKey.objects.create_key(
        name="expired", expiry_date=now - dt.timedelta(minutes=1)
    )
    later, _ = APIKey.objects.create_key(name="expires later", expiry_date=now + dt.timedelta(1))

    def pending(key, *, enabled: bool = True, waited: float = 3600) -> Delivery:
        endpoint = Endpoint.objects.create(
            public_id=f"wh_{key.name}_{enabled}",
            api_key=key,
            url="https://receiver.example/hook",
            enabled=enabled,
            secret="whsec_x",
        )
        return Delivery.objects.create(
            endpoint=endpoint, event=event, next_attempt_at=now - dt.timedelta(seconds=waited)
        )

    pending(valid, enabled=False)
    pending(revoked)
    pending(expired)
    body = api.get("/health").json()
    assert body["checks"]["webhooks"] == WEBHOOKS_IDLE
    assert body["status"] == "ok"

    pending(later, waited=90)  # an expiry still ahead: sendable, and late
    body = api.get("/health").json()
    webhooks = body["checks"]["webhooks"]
    assert (body["status"], webhooks["status"], webhooks["pendingDeliveries"]) == (
        "degraded",
        "lagging",
        1,
    )
    assert 90 <= webhooks["oldestPendingSeconds"] <= 95
