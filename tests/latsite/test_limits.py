"""API keys and rate limits: counters in Redis, shared by every server process."""

from __future__ import annotations

import datetime as dt
import math
import time
import uuid

import pytest
from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from django_redis import get_redis_connection
from prometheus_client import REGISTRY
from rest_framework.request import Request
from rest_framework.test import APIRequestFactory
from rest_framework_api_key.models import APIKey

from core.api.throttling import (
    ClientRateThrottle,
    SimulateRateThrottle,
    SimulateThrottle,
    rate_limit_headers,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def ip() -> str:
    """A client address of the test's own, so that counters never meet across tests."""
    n = uuid.uuid4().int
    return f"10.{n % 250}.{(n >> 8) % 250}.{(n >> 16) % 250}"


def get(api, ip, path="/lat", **headers):
    return api.get(path, REMOTE_ADDR=ip, **headers)


def test_counters_live_in_redis(settings):
    assert settings.CACHES["default"]["BACKEND"] == "django_redis.cache.RedisCache"
    cache.set("probe", 1)
    assert get_redis_connection("default").exists(cache.make_key("probe"))


def test_anonymous_limit_then_429_with_retry_after(api, dataset, settings, ip, minute_window):
    settings.RATE_LIMIT_ANON = "3/min"
    assert [get(api, ip).status_code for _ in range(3)] == [200, 200, 200]
    response = get(api, ip)
    assert response.status_code == 429
    assert response.json()["error"]["code"] == "rate_limit_exceeded"
    assert response.json()["error"]["doc_url"].endswith("#rate_limit_exceeded")
    assert 1 <= int(response["Retry-After"]) <= 61
    # Another client is not affected.
    other = ip.rsplit(".", 1)[0] + ".251"
    assert get(api, other).status_code == 200


def test_a_key_raises_the_limit(api, dataset, settings, ip, minute_window):
    settings.RATE_LIMIT_ANON = "2/min"
    settings.RATE_LIMIT_KEYED = "5/min"
    _, key = APIKey.objects.create_key(name="dashboard")
    codes = [get(api, ip, HTTP_X_API_TOKEN=key).status_code for _ in range(6)]
    assert codes == [200] * 5 + [429]
    # The anonymous counter of that address was not used by the keyed calls.
    assert get(api, ip).status_code == 200


def test_unknown_key_is_401(api, dataset, ip):
    for key in ["nonsense", "abcd.efgh", "Ab12Cd34.notthekeyatall"]:
        response = get(api, ip, HTTP_X_API_TOKEN=key)
        assert response.status_code == 401
        assert response.json()["error"]["code"] == "unauthorized"


def test_a_key_of_another_with_the_same_prefix_is_401(api, dataset, ip):
    api_key, key = APIKey.objects.create_key(name="real")
    secret = key.split(".", 1)[1]
    forged = api_key.prefix + "." + ("y" if secret[0] == "x" else "x") + secret[1:]
    assert get(api, ip, HTTP_X_API_TOKEN=forged).status_code == 401


def test_disabled_key_is_403(api, dataset, ip):
    api_key, key = APIKey.objects.create_key(name="old", revoked=False)
    assert get(api, ip, HTTP_X_API_TOKEN=key).status_code == 200
    api_key.revoked = True
    api_key.save()
    response = get(api, ip, HTTP_X_API_TOKEN=key)
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "forbidden"


def test_cors_allows_any_origin_on_the_api_only(api, dataset, ip):
    response = api.get("/lat", REMOTE_ADDR=ip, HTTP_ORIGIN="https://wallet.example")
    assert response["Access-Control-Allow-Origin"] == "*"
    assert "Access-Control-Allow-Origin" not in api.get(
        "/admin/login/", HTTP_ORIGIN="https://wallet.example"
    )
    preflight = api.options(
        "/lat/0x0000000000000000000000000000000000001001/deposit",
        REMOTE_ADDR=ip,
        HTTP_ORIGIN="https://wallet.example",
        HTTP_ACCESS_CONTROL_REQUEST_METHOD="POST",
        HTTP_ACCESS_CONTROL_REQUEST_HEADERS="content-type,x-api-token",
    )
    assert preflight.status_code == 200
    assert "POST" in preflight["Access-Control-Allow-Methods"]
    assert "x-api-token" in preflight["Access-Control-Allow-Headers"]


# --- bad keys, IPv6 networks, simulate-deposit's own limit ----------------------------------


def apikey_queries(captured) -> int:
    return sum("rest_framework_api_key_apikey" in q["sql"] for q in captured.captured_queries)


def test_bad_keys_are_limited_per_ip_before_the_lookup(api, dataset, settings, ip, minute_window):
    settings.RATE_LIMIT_ANON = "3/min"
    bad = ["nonsense", "Ab12Cd34.notthekeyatall", "abcd.efgh"]
    assert [get(api, ip, HTTP_X_API_TOKEN=k).status_code for k in bad] == [401, 401, 401]
    with CaptureQueriesContext(connection) as captured:
        response = get(api, ip, HTTP_X_API_TOKEN="Zz99Yy88.another")
    assert response.status_code == 429
    assert response.json()["error"]["code"] == "rate_limit_exceeded"
    assert 1 <= int(response["Retry-After"]) <= 61
    assert apikey_queries(captured) == 0  # refused before the key was looked up
    # Another address still gets its 401.
    assert get(api, ip.rsplit(".", 1)[0] + ".252", HTTP_X_API_TOKEN="x.y").status_code == 401


def test_disabled_and_expired_keys_count_as_bad_keys(api, dataset, settings, ip, minute_window):
    settings.RATE_LIMIT_ANON = "2/min"
    _, revoked = APIKey.objects.create_key(name="revoked", revoked=True)
    past = timezone.now() - dt.timedelta(days=1)
    _, expired = APIKey.objects.create_key(name="expired", expiry_date=past)
    assert get(api, ip, HTTP_X_API_TOKEN=revoked).status_code == 403
    assert get(api, ip, HTTP_X_API_TOKEN=expired).status_code == 403
    assert get(api, ip, HTTP_X_API_TOKEN=revoked).status_code == 429


def test_a_valid_key_is_not_blocked_by_anonymous_traffic(api, dataset, settings, ip, minute_window):
    settings.RATE_LIMIT_ANON = "2/min"
    _, key = APIKey.objects.create_key(name="dashboard")
    assert [get(api, ip).status_code for _ in range(3)] == [200, 200, 429]
    assert get(api, ip, HTTP_X_API_TOKEN=key).status_code == 200


def test_401_carries_www_authenticate_and_the_error_body(api, dataset, ip):
    response = get(api, ip, HTTP_X_API_TOKEN="Ab12Cd34.unknown")
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == 'ApiKey header="X-API-Token"'
    assert response.json() == {
        "error": {
            "code": "unauthorized",
            "message": "The API key in X-API-Token is not known.",
            "doc_url": "/docs/errors#unauthorized",
        }
    }


@pytest.fixture
def net64() -> str:
    """An IPv6 /64 of the test's own, as a prefix of four groups."""
    n = uuid.uuid4().int
    return f"2001:db8:{n % 0xFFFF:x}:{(n >> 16) % 0xFFFF:x}"


def test_ipv6_clients_share_a_limit_per_64(api, dataset, settings, net64, minute_window):
    settings.RATE_LIMIT_ANON = "3/min"
    same_net = [f"{net64}::1", f"{net64}:abcd:1:2:3", f"{net64}:ffff:ffff:ffff:fffe"]
    assert [get(api, addr).status_code for addr in same_net] == [200, 200, 200]
    assert get(api, f"{net64}::99").status_code == 429
    # The neighbouring /64 has its own budget.
    head, last = net64.rsplit(":", 1)
    neighbour = f"{head}:{(int(last, 16) + 1) % 0xFFFF:x}"
    assert get(api, f"{neighbour}::1").status_code == 200


def test_ipv4_clients_are_counted_per_address(api, dataset, settings, ip, minute_window):
    settings.RATE_LIMIT_ANON = "1/min"
    assert get(api, ip).status_code == 200
    assert get(api, ip).status_code == 429
    assert get(api, f"::ffff:{ip}").status_code == 429  # the same IPv4 client, mapped
    head, last = ip.rsplit(".", 1)
    assert get(api, f"{head}.{(int(last) + 1) % 250}").status_code == 200


def test_ipv6_behind_proxies_uses_the_forwarded_address(
    api, dataset, settings, net64, minute_window
):
    settings.RATE_LIMIT_ANON = "1/min"
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "NUM_PROXIES": 1}
    proxy = "192.0.2.10"
    first = api.get("/lat", REMOTE_ADDR=proxy, HTTP_X_FORWARDED_FOR=f"{net64}::1")
    assert first.status_code == 200
    second = api.get("/lat", REMOTE_ADDR=proxy, HTTP_X_FORWARDED_FOR=f"{net64}::2")
    assert second.status_code == 429
    head, last = net64.rsplit(":", 1)
    neighbour = f"{head}:{(int(last, 16) + 1) % 0xFFFF:x}::1"
    other = api.get("/lat", REMOTE_ADDR=proxy, HTTP_X_FORWARDED_FOR=f"{net64}::3, {neighbour}")
    assert other.status_code == 200  # what the one proxy appended, not what the client sent


def simulate_allowed(settings, ip, api_key=None) -> bool:
    request = Request(APIRequestFactory().post("/simulate", REMOTE_ADDR=ip))
    request._authenticator, request._user, request._auth = None, None, api_key
    return SimulateRateThrottle().allow_request(request, None)


def test_simulate_has_its_own_limit_per_ip_and_per_key(settings, ip, minute_window):
    settings.RATE_LIMIT_SIMULATE = "2/min"
    assert [simulate_allowed(settings, ip) for _ in range(3)] == [True, True, False]
    api_key, _ = APIKey.objects.create_key(name="simulating")
    assert [simulate_allowed(settings, ip, api_key) for _ in range(3)] == [True, True, False]
    # Its counters are not ClientRateThrottle's.
    request = Request(APIRequestFactory().get("/lat", REMOTE_ADDR=ip))
    request._authenticator, request._user, request._auth = None, None, None
    settings.RATE_LIMIT_ANON = "1/min"
    assert ClientRateThrottle().allow_request(request, None) is True


def test_simulate_limit_defaults_to_20_a_minute(settings, ip):
    del settings.RATE_LIMIT_SIMULATE
    assert [simulate_allowed(settings, ip) for _ in range(21)] == [True] * 20 + [False]


# --- simulate-deposit's two limits in one round trip ---------------------------------------------


def simulate_request(ip, api_key=None) -> Request:
    request = Request(APIRequestFactory().post("/simulate", REMOTE_ADDR=ip))
    request._authenticator, request._user, request._auth = None, None, api_key
    return request


def redis_counter(scope: str, ident: str, seconds: int) -> int | None:
    """The counter of the current window, read straight from Redis."""
    key = f"{scope}:{ident}:{seconds}:{int(time.time() // seconds)}"
    raw = get_redis_connection("default").get(cache.make_key(key))
    return None if raw is None else int(raw)


@pytest.fixture
def round_trips(monkeypatch) -> list[bytes]:
    """Every packed command sent to Redis from now on (a pipeline is one send)."""
    from redis.connection import AbstractConnection

    sent: list[bytes] = []
    send = AbstractConnection.send_packed_command

    def counting(self, command, check_health=True):
        sent.append(command if isinstance(command, bytes) else b"".join(command))
        return send(self, command, check_health)

    monkeypatch.setattr(AbstractConnection, "send_packed_command", counting)
    return sent


def rejections(scope: str) -> float:
    """429s counted under `scope` by this process (the registry telemetry.py records in)."""
    value = REGISTRY.get_sample_value("lat_rate_limit_rejections_total", {"scope": scope})
    return value or 0.0


def test_simulate_throttle_counts_both_limits_exactly_in_one_round_trip(
    settings, ip, round_trips, minute_window
):
    settings.RATE_LIMIT_ANON = "5/min"
    settings.RATE_LIMIT_SIMULATE = "3/min"
    allowed, headers = [], []
    for _ in range(4):
        request = simulate_request(ip)
        round_trips.clear()
        allowed.append(SimulateThrottle().allow_request(request, None))
        # One round trip: INCR and EXPIRE of each window in one pipeline.
        (sent,) = round_trips
        assert (sent.count(b"INCRBY"), sent.count(b"EXPIRE")) == (2, 2)
        headers.append(rate_limit_headers(request._request))
    assert allowed == [True, True, True, False]
    # Each counter holds exactly the four requests, read back from Redis itself.
    assert redis_counter("ratelimit", f"ip:{ip}", 60) == 4
    assert redis_counter("ratelimit-simulate", f"ip:{ip}", 60) == 4
    # The headers describe the tighter window: RATE_LIMIT_SIMULATE's 3, left 2, 1, 0, 0.
    assert [(h["RateLimit-Limit"], h["RateLimit-Remaining"]) for h in headers] == [
        ("3", "2"),
        ("3", "1"),
        ("3", "0"),
        ("3", "0"),
    ]


def test_simulate_throttle_keeps_a_keys_counters_apart(settings, ip, minute_window):
    settings.RATE_LIMIT_KEYED = "10/min"
    settings.RATE_LIMIT_SIMULATE = "2/min"
    api_key, _ = APIKey.objects.create_key(name="simulating")
    outcomes = [
        SimulateThrottle().allow_request(simulate_request(ip, api_key), None) for _ in range(3)
    ]
    assert outcomes == [True, True, False]
    assert redis_counter("ratelimit", f"key:{api_key.pk}", 60) == 3
    assert redis_counter("ratelimit-simulate", f"key:{api_key.pk}", 60) == 3
    assert redis_counter("ratelimit", f"ip:{ip}", 60) is None  # the address was not counted


def test_simulate_throttle_waits_for_the_longest_window_exceeded(settings, ip, minute_window):
    settings.RATE_LIMIT_ANON = "2/hour"
    settings.RATE_LIMIT_SIMULATE = "1/min"
    before = {scope: rejections(scope) for scope in ("anon", "simulate")}
    throttle = SimulateThrottle()
    assert throttle.allow_request(simulate_request(ip), None) is True
    # Over RATE_LIMIT_SIMULATE only: the minute's end.
    now = time.time()
    assert throttle.allow_request(simulate_request(ip), None) is False
    after = time.time()
    assert math.ceil(60 - after % 60) <= math.ceil(throttle.wait()) <= math.ceil(60 - now % 60)
    # Over both: the longer wait, the hour's end.
    now = time.time()
    assert throttle.allow_request(simulate_request(ip), None) is False
    after = time.time()
    wait = math.ceil(throttle.wait())
    assert math.ceil(3600 - after % 3600) <= wait <= math.ceil(3600 - now % 3600)
    # Each limit counted its own rejections: simulate twice, the general limit once.
    assert rejections("simulate") - before["simulate"] == 2
    assert rejections("anon") - before["anon"] == 1
