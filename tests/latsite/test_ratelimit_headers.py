"""RateLimit-Limit, RateLimit-Remaining and RateLimit-Reset on every answer a rate limit counted,
Retry-After on its 429, none while Redis is away (limits fail open), exposed to browsers and
documented in the OpenAPI schema."""

from __future__ import annotations

import math
import time
import uuid

import pytest
from drf_spectacular.generators import SchemaGenerator
from rest_framework_api_key.models import APIKey

from core import redisguard
from tests import factories as f
from tests.redisserver import RedisServer, cache_settings

pytestmark = pytest.mark.django_db

MINUTE = 60
SIMULATE = f"/lat/{f.address(0x1001)}/simulate-deposit"


@pytest.fixture
def ip() -> str:
    """A client address of the test's own, so that counters never meet across tests."""
    n = uuid.uuid4().int
    return f"10.{n % 250}.{(n >> 8) % 250}.{(n >> 16) % 250}"


def reset_bounds(call):
    """(response, lowest and highest RateLimit-Reset the window may give): seconds to the end
    of the minute, measured before and after the request, rounded up."""
    before = time.time()
    response = call()
    after = time.time()
    return response, math.ceil(MINUTE - after % MINUTE), math.ceil(MINUTE - before % MINUTE)


def assert_window(response, *, limit: int, remaining: int, low: int, high: int) -> None:
    assert response["RateLimit-Limit"] == str(limit)
    assert response["RateLimit-Remaining"] == str(remaining)
    assert low <= int(response["RateLimit-Reset"]) <= high


def test_remaining_counts_down_then_429(api, dataset, settings, ip, minute_window):
    settings.RATE_LIMIT_ANON = "3/min"
    for remaining in (2, 1, 0):
        response, low, high = reset_bounds(lambda: api.get("/lat", REMOTE_ADDR=ip))
        assert response.status_code == 200
        assert_window(response, limit=3, remaining=remaining, low=low, high=high)
    response, low, high = reset_bounds(lambda: api.get("/lat", REMOTE_ADDR=ip))
    assert response.status_code == 429
    assert_window(response, limit=3, remaining=0, low=low, high=high)
    assert response["Retry-After"] == response["RateLimit-Reset"]


def test_errors_a_limit_counted_carry_the_headers_too(api, dataset, settings, ip, minute_window):
    settings.RATE_LIMIT_ANON = "5/min"
    response, low, high = reset_bounds(lambda: api.get(f"/lat/{f.address(0xDEAD)}", REMOTE_ADDR=ip))
    assert response.status_code == 404
    assert_window(response, limit=5, remaining=4, low=low, high=high)


def test_a_key_counts_against_its_own_limit(api, dataset, settings, ip, minute_window):
    settings.RATE_LIMIT_ANON = "2/min"
    settings.RATE_LIMIT_KEYED = "5/min"
    _, key = APIKey.objects.create_key(name="dashboard")
    for remaining in (4, 3):
        response, low, high = reset_bounds(
            lambda: api.get("/lat", REMOTE_ADDR=ip, HTTP_X_API_TOKEN=key)
        )
        assert_window(response, limit=5, remaining=remaining, low=low, high=high)
    response = api.get("/lat", REMOTE_ADDR=ip)  # the address's anonymous counter is untouched
    assert (response["RateLimit-Limit"], response["RateLimit-Remaining"]) == ("2", "1")


def test_simulate_reports_the_tighter_of_its_two_limits(api, dataset, settings, ip, minute_window):
    settings.RATE_LIMIT_ANON = "10/min"
    settings.RATE_LIMIT_SIMULATE = "2/min"

    def simulate():
        return api.post(SIMULATE, data={}, format="json", REMOTE_ADDR=ip)

    for remaining in (1, 0):
        response, low, high = reset_bounds(simulate)
        assert response.status_code == 422  # an empty body: counted all the same
        assert_window(response, limit=2, remaining=remaining, low=low, high=high)
    response, low, high = reset_bounds(simulate)
    assert response.status_code == 429
    assert_window(response, limit=2, remaining=0, low=low, high=high)
    assert response["Retry-After"] == response["RateLimit-Reset"]
    # The client limit counted the three simulations: 10 - 3 - this one.
    response = api.get("/lat", REMOTE_ADDR=ip)
    assert (response["RateLimit-Limit"], response["RateLimit-Remaining"]) == ("10", "6")


def test_bad_keys_count_against_their_own_budget(api, dataset, settings, ip, minute_window):
    settings.RATE_LIMIT_ANON = "2/min"
    statuses, remaining = [], []
    for _ in range(3):
        response = api.get("/lat", REMOTE_ADDR=ip, HTTP_X_API_TOKEN="Ab12Cd34.notakey")
        statuses.append(response.status_code)
        remaining.append(response["RateLimit-Remaining"])
    # Two bad keys a window: both answered 401 (the second one uses the budget up), the third
    # refused before its lookup.
    assert statuses == [401, 401, 429]
    assert remaining == ["1", "0", "0"]


def test_ops_pages_are_not_counted(api, dataset, settings, ip, minute_window):
    settings.RATE_LIMIT_ANON = "1/min"
    for path in ("/health", "/version", "/version"):
        response = api.get(path, REMOTE_ADDR=ip)
        assert response.status_code == 200
        assert "RateLimit-Limit" not in response


def test_browsers_may_read_the_headers(api, dataset, ip):
    response = api.get("/lat", REMOTE_ADDR=ip, HTTP_ORIGIN="https://wallet.example")
    exposed = {h.strip().lower() for h in response["Access-Control-Expose-Headers"].split(",")}
    assert {"ratelimit-limit", "ratelimit-remaining", "ratelimit-reset", "retry-after"} <= exposed


def test_no_headers_while_redis_is_down(api, dataset, settings, ip):
    server = RedisServer()
    server.start()
    try:
        settings.CACHES = cache_settings(server, settings)
        redisguard.breaker.reset()
        settings.RATE_LIMIT_ANON = "1/min"
        assert api.get("/lat", REMOTE_ADDR=ip)["RateLimit-Remaining"] == "0"
        server.stop()
        for _ in range(2):  # over the limit, but nothing counts: fail open, no headers
            response = api.get("/lat", REMOTE_ADDR=ip)
            assert response.status_code == 200
            assert "RateLimit-Limit" not in response
            assert "RateLimit-Remaining" not in response
            assert "RateLimit-Reset" not in response
    finally:
        server.close()
        redisguard.breaker.reset()


def test_simulate_fails_open_without_headers_while_redis_is_down(api, dataset, settings, ip):
    """Both of simulate-deposit's limits are counted in one round trip; with Redis gone neither
    counts, the request is answered all the same, and no header is guessed."""
    server = RedisServer()
    server.start()
    try:
        settings.CACHES = cache_settings(server, settings)
        redisguard.breaker.reset()
        settings.RATE_LIMIT_ANON = "5/min"
        settings.RATE_LIMIT_SIMULATE = "1/min"
        response = api.post(SIMULATE, data={}, format="json", REMOTE_ADDR=ip)
        assert response.status_code == 422
        assert (response["RateLimit-Limit"], response["RateLimit-Remaining"]) == ("1", "0")
        server.stop()
        for _ in range(2):  # over RATE_LIMIT_SIMULATE, but nothing counts: fail open
            response = api.post(SIMULATE, data={}, format="json", REMOTE_ADDR=ip)
            assert response.status_code == 422
            assert not RATE_HEADERS & set(response.headers)
    finally:
        server.close()
        redisguard.breaker.reset()


RATE_HEADERS = {"RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset"}


def test_the_schema_documents_the_headers():
    schema = SchemaGenerator().get_schema(request=None, public=True)
    responses = schema["paths"]["/lat"]["get"]["responses"]
    # X-Request-ID is on every answer of every operation (tests/latsite/test_logging.py), and
    # the validators of conditional GET on the reads' (tests/latsite/test_conditional_get.py).
    assert set(responses["200"]["headers"]) == {
        *RATE_HEADERS,
        "X-Request-ID",
        "ETag",
        "Cache-Control",
    }
    assert set(responses["429"]["headers"]) == {*RATE_HEADERS, "Retry-After", "X-Request-ID"}
    simulate = schema["paths"]["/lat/{address}/simulate-deposit"]["post"]["responses"]
    assert all(RATE_HEADERS <= set(r["headers"]) for r in simulate.values())
    for path in ("/health", "/version"):
        for response in schema["paths"][path]["get"]["responses"].values():
            assert set(response["headers"]) == {"X-Request-ID"}
