"""Redis faults, made real: a redis-server of this module's own is stopped (connections refused)
or paused with SIGSTOP (connections accepted, never answered). The API keeps answering from the
database, a request pays at most one Redis timeout (0.5 s), only the first request of an outage
pays it, rate limits fail open with one warning, and a write made while Redis was away is served
once it is back."""

from __future__ import annotations

import logging
import time
import uuid

import pytest
import redis
from django.core.cache import cache
from rest_framework_api_key.models import APIKey

from core import redisguard
from core.api import documents
from core.api.throttling import _count
from core.locks import _cache_lock, lock_key
from deposits.services import deposit_record_events
from tests import factories as f
from tests.expected import eth_lat_json, native_lat_json
from tests.redisserver import RedisServer, cache_settings

pytestmark = pytest.mark.django_db

A = f.address
TIMEOUT = 0.5  # REDIS_CONNECT_TIMEOUT and REDIS_SOCKET_TIMEOUT
BOUND = 1.5  # seconds any request may take during an outage on a loaded 2-core machine
DETAIL = f"/lat/{A(0x1001)}?withTvl=true&withCuratedMetadata=true&withRewards=true"


@pytest.fixture
def own_redis(redis_server, settings):
    """The cache (and so the counters and documents) on this module's redis-server, healthy."""
    redis_server.ensure_running()
    with redis_server.client() as client:
        client.flushall()
    # Changing CACHES makes Django drop its cache connections.
    settings.CACHES = cache_settings(redis_server, settings)
    settings.REDIS_RETRY_AFTER = 5.0
    redisguard.breaker.reset()
    documents.forget_pending_bumps()
    yield redis_server
    redis_server.ensure_running()
    redisguard.breaker.reset()
    documents.forget_pending_bumps()


@pytest.fixture
def failures(monkeypatch) -> list[str]:
    """Every Redis failure the breaker records (each one a request that paid for Redis)."""
    seen: list[str] = []
    record = redisguard.breaker.failure

    def spy(what, exc):
        seen.append(what)
        record(what, exc)

    monkeypatch.setattr(redisguard.breaker, "failure", spy)
    return seen


def fault(server: RedisServer, kind: str) -> None:
    if kind == "stopped":
        server.stop()
    else:
        server.pause()


def timed(call):
    started = time.perf_counter()
    response = call()
    return response, time.perf_counter() - started


def expected_detail() -> dict:
    # stETH: 10 held + 2 queued + (5 + 3) staked = 20 tokens at 1 ETH;
    # USDx: 1000 held + 2000 staked = 3000 tokens at 0.0005 ETH = 1.5 ETH.
    zero = {"apy": "0", "baseApy": "0", "nativeApy": "0", "totalApy": "0"}
    windows = ["current", "avg30d", "trailing7d", "trailing30d", "trailing3m", "trailing6m"]
    return eth_lat_json() | {
        "assets": [
            {
                "asset": A(0x5E),
                "balance": "10000000000000000000",
                "queuedBalance": "2000000000000000000",
            },
            {"asset": A(0x6D), "balance": "1000000000", "queuedBalance": "0"},
        ],
        "tvl": {
            "tvl": 21.5,
            "unstakedTvl": 10.5,
            "stakedTvl": 9.0,
            "queuedTvl": 2.0,
            "tvlAssets": {"stETH": 20.0, "USDx": 3000.0},
            "tvlAssetsEth": {"stETH": 20.0, "USDx": 1.5},
        },
        "apys": {window: zero for window in [*windows, "trailing1y"]},
        "curatedMetadata": {
            "avsAddress": A(0xA1),
            "metadataName": "Example AVS",
            "metadataDescription": "Validates examples.",
            "metadataCommunityChat": None,
            "metadataLogo": "https://avs.example/logo.png",
            "metadataMessaging": None,
            "metadataWebsite": "https://avs.example",
            "metadataSocial": "https://x.com/avs",
            "metadataCode": None,
            "metadataTokenAddress": None,
            "tags": ["oracle", "restaking"],
        },
    }


def requests_and_answers(api, dataset) -> list[tuple[str, object, object]]:
    """(name, request, check) for a spread of endpoints, with hand-computed answers."""
    deposit_record_events(lat=dataset.eth_lat, events=[f.event(90, 3, amount=7, shares=5)])
    _, key = APIKey.objects.create_key(name="dashboard")
    wallet = A(0xBEE)
    deposit_body = {"assets": [A(0x5E)], "amounts": ["1000"], "receiver": wallet}

    def deposits_ok(body):
        assert body["meta"] == {"total": 1, "skip": 0, "take": 12, "next": None}
        row = body["data"][0]
        assert (row["amount"], row["shares"], row["createdAtBlock"]) == ("7", "5", 90)
        assert row["liquidTokenAddress"] == A(0x1001)

    def deposit_ok(body):
        assert body["data"]["transaction"]["to"] == A(0x1001)
        assert (body["data"]["chainId"], body["data"]["functionName"]) == ("31337", "deposit")

    fees = {"managementFee": 2.5, "performanceFee": 10.0, "avgOperatorPerformanceFee": 7.5}
    return [
        ("list", lambda: api.get("/lat"), {"data": [eth_lat_json(), native_lat_json()]}),
        ("detail", lambda: api.get(DETAIL), expected_detail()),
        ("keyed", lambda: api.get("/lat", HTTP_X_API_TOKEN=key), None),
        ("deposits", lambda: api.get("/metrics/deposits"), deposits_ok),
        ("fees", lambda: api.get(f"/lat/{A(0x1001)}/fees"), {"data": fees}),
        (
            "exchange",  # one stETH buys 16/20 eLAT
            lambda: api.get(f"/lat/exchange/{A(0x5E)}"),
            {"address": A(0x5E), "exchangeRates": {"eLAT": 0.8}},
        ),
        (
            "deposit",
            lambda: api.post(f"/lat/{A(0x1001)}/deposit", deposit_body, "json"),
            deposit_ok,
        ),
    ]


def check(name, response, expected) -> None:
    assert response.status_code == 200, (name, response.content)
    if callable(expected):
        expected(response.json())
    elif expected is not None:
        assert response.json() == expected, name


@pytest.mark.parametrize("kind", ["stopped", "paused"])
def test_every_endpoint_answers_from_the_database_during_an_outage(
    api, dataset, own_redis, failures, caplog, kind
):
    calls = requests_and_answers(api, dataset)
    for name, call, expected in calls:  # healthy: the documents are now cached in Redis
        check(name, call(), expected)
    with own_redis.client() as client:
        assert any(k.startswith(b"lat:1:doc:") for k in client.keys())
    caplog.set_level(logging.WARNING, logger="core.redisguard")

    fault(own_redis, kind)
    elapsed = []
    for _ in range(2):
        for name, call, expected in calls:
            response, seconds = timed(call)
            check(name, response, expected)
            elapsed.append(seconds)

    assert max(elapsed) < BOUND, elapsed
    assert len(failures) == 1, failures  # only the first request of the outage paid
    if kind == "paused":
        assert elapsed[0] >= TIMEOUT * 0.9  # ... a read timeout
    warnings = [r for r in caplog.records if r.name == "core.redisguard"]
    assert len(warnings) == 1
    assert "rate limits fail open" in warnings[0].getMessage()


def test_timeouts_apply_to_the_cache_and_to_the_raw_client(own_redis, settings):
    assert settings.REDIS_CONNECT_TIMEOUT <= TIMEOUT
    assert settings.REDIS_SOCKET_TIMEOUT <= TIMEOUT
    cache.set("probe", 1)
    raw = cache.client.get_client(write=True)
    kwargs = raw.connection_pool.connection_kwargs
    assert kwargs["socket_connect_timeout"] == settings.REDIS_CONNECT_TIMEOUT
    assert kwargs["socket_timeout"] == settings.REDIS_SOCKET_TIMEOUT
    own_redis.pause()
    for operation in (lambda: cache.get("probe"), lambda: _count("probe-count", ttl=5)):
        started = time.perf_counter()
        with pytest.raises(redis.TimeoutError):
            operation()
        assert time.perf_counter() - started < TIMEOUT + 0.4  # no retries on top


def test_after_the_pause_one_probe_pays_and_success_closes_the_breaker(
    api, dataset, own_redis, failures, settings
):
    settings.REDIS_RETRY_AFTER = 0.3
    own_redis.pause()
    assert api.get("/lat").status_code == 200
    assert len(failures) == 1
    time.sleep(0.4)
    _, seconds = timed(lambda: api.get("/lat"))  # the probe: Redis still silent
    assert len(failures) == 2
    assert seconds < BOUND
    own_redis.resume()
    time.sleep(0.4)
    assert api.get("/lat").status_code == 200
    assert not redisguard.breaker.is_open
    assert api.get("/lat").status_code == 200
    assert len(failures) == 2


def renamed(api) -> str:
    return api.get(DETAIL).json()["name"]


@pytest.mark.parametrize("recovery", ["sigcont", "restart"])
def test_a_write_during_the_outage_is_served_once_redis_is_back(
    api, dataset, own_redis, settings, recovery
):
    settings.REDIS_RETRY_AFTER = 0.3
    assert renamed(api) == "Example ETH LAT"  # cached in Redis
    with own_redis.client() as client:
        generation = client.get(f"lat:1:{documents._keys('')[0]}")
    assert generation is not None

    own_redis.pause()
    assert renamed(api) == "Example ETH LAT"  # the breaker opens here
    dataset.eth_lat.name = "Renamed"
    dataset.eth_lat.save()  # the signal's invalidation cannot reach Redis
    assert renamed(api) == "Renamed"  # built from the database meanwhile

    if recovery == "sigcont":
        own_redis.resume()
        with own_redis.client() as client:  # Redis kept the old token and the old document
            assert client.get(f"lat:1:{documents._keys('')[0]}") == generation
    else:
        own_redis.stop()
        own_redis.start()
    time.sleep(0.4)  # past REDIS_RETRY_AFTER
    assert renamed(api) == "Renamed"
    assert renamed(api) == "Renamed"
    assert not documents._pending


def test_the_retry_timer_sends_the_invalidation_without_a_request(
    api, dataset, own_redis, settings
):
    """A process that only writes (a Celery worker) invalidates once Redis is back."""
    settings.REDIS_RETRY_AFTER = 0.2
    assert renamed(api) == "Example ETH LAT"
    key = f"lat:1:{documents._keys('')[0]}"
    with own_redis.client() as client:
        generation = client.get(key)
    own_redis.stop()
    dataset.eth_lat.name = "Renamed"
    dataset.eth_lat.save()
    assert documents._pending
    own_redis.start()
    deadline = time.monotonic() + 5
    while documents._pending and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not documents._pending
    with own_redis.client() as client:
        assert client.get(key) not in (None, generation)


def test_a_document_never_outlives_document_cache_seconds(api, dataset, own_redis, settings):
    """Even an entry written late (a command Redis ran after a pause) with a long expiry."""
    settings.DOCUMENT_CACHE_SECONDS = 60
    path = f"/lat/{A(0x1001)}"
    assert api.get(path).json()["name"] == "Example ETH LAT"
    generation_key, document_key = documents._keys(f"json:lat:{A(0x1001)}:False:False:False")
    generation = cache.get(generation_key)
    stale = b'{"name":"Stale"}'  # a document is stored as the JSON it is answered with
    cache.set(document_key, (generation, time.time() - 61, stale), timeout=3600)
    documents._held.clear()  # as in another process: the entry is read from Redis
    assert api.get(path).json()["name"] == "Example ETH LAT"
    cache.set(document_key, (generation, time.time() - 30, stale), timeout=3600)
    documents._held.clear()
    assert api.get(path).json() == {"name": "Stale"}  # younger than the bound: still served


def test_a_stale_document_from_another_process_expires(api, dataset, own_redis, settings):
    """The invalidation was lost (another process wrote): the bound still ends the staleness."""
    settings.DOCUMENT_CACHE_SECONDS = 4
    settings.REDIS_RETRY_AFTER = 0.2
    started = time.time()
    assert renamed(api) == "Example ETH LAT"
    own_redis.pause()
    assert renamed(api) == "Example ETH LAT"  # the breaker opens: the write's bump is skipped
    dataset.eth_lat.name = "Renamed"
    dataset.eth_lat.save()
    documents.forget_pending_bumps()  # as if another process had written
    own_redis.resume()
    time.sleep(0.3)
    assert renamed(api) == "Example ETH LAT"  # stale, from Redis, for now
    time.sleep(max(0.0, started + 4.1 - time.time()))
    assert renamed(api) == "Renamed"


def test_rate_limits_fail_open_and_warn_once(
    api, dataset, own_redis, settings, caplog, minute_window
):
    settings.RATE_LIMIT_ANON = "2/min"
    settings.REDIS_RETRY_AFTER = 0  # every request tries Redis again, and fails
    caplog.set_level(logging.WARNING, logger="core.redisguard")
    ip = f"10.9.{uuid.uuid4().int % 250}.7"
    own_redis.stop()
    codes = [api.get("/lat", REMOTE_ADDR=ip).status_code for _ in range(5)]
    assert codes == [200] * 5
    bad = api.get("/lat", REMOTE_ADDR=ip, HTTP_X_API_TOKEN="Ab12Cd34.unknown")
    assert bad.status_code == 401  # the bad-key limit fails open too
    assert len([r for r in caplog.records if r.name == "core.redisguard"]) == 1
    own_redis.start()
    codes = [api.get("/lat", REMOTE_ADDR=ip).status_code for _ in range(3)]
    assert codes == [200, 200, 429]


def test_the_cache_lock_is_not_taken_when_the_cache_is_unreachable(own_redis, caplog):
    key = lock_key("cache-job", uuid.uuid4().hex)
    own_redis.stop()
    caplog.set_level(logging.WARNING, logger="core.locks")
    with _cache_lock(key) as acquired:
        assert acquired is False
    assert any("not taken" in r.getMessage() for r in caplog.records if r.name == "core.locks")
    own_redis.start()
    redisguard.breaker.reset()
    with _cache_lock(key) as first, _cache_lock(key) as second:
        assert (first, second) == (True, False)
    with _cache_lock(key) as again:
        assert again is True  # released


def test_the_cache_lock_released_during_an_outage_does_not_raise(own_redis):
    key = lock_key("cache-job", uuid.uuid4().hex)
    with _cache_lock(key) as acquired:
        assert acquired is True
        own_redis.pause()
    own_redis.resume()


def test_during_an_outage_each_process_keeps_its_documents_briefly(
    api, dataset, own_redis, settings, django_assert_num_queries
):
    """Reads stay near their cached speed while Redis is away: the list is built once, then
    served from the process for DOCUMENT_FALLBACK_SECONDS; a write in the process drops it at
    once, and a write the process cannot see (another process's) shows after that bound."""
    from lats.models import Lat

    settings.DOCUMENT_FALLBACK_SECONDS = 1
    own_redis.stop()
    assert renamed(api) == "Example ETH LAT"  # the outage's first request builds it
    with django_assert_num_queries(0):
        assert renamed(api) == "Example ETH LAT"

    dataset.eth_lat.name = "Renamed here"
    dataset.eth_lat.save()  # this process's write: its signal drops the local documents
    assert renamed(api) == "Renamed here"

    Lat.objects.filter(pk=dataset.eth_lat.pk).update(name="Renamed elsewhere")  # no signal
    assert renamed(api) == "Renamed here"
    time.sleep(1.1)
    assert renamed(api) == "Renamed elsewhere"
