"""API keys and rate limits: counters in Redis, shared by every server process."""

from __future__ import annotations

import uuid

import pytest
from django.core.cache import cache
from rest_framework_api_key.models import APIKey

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
    from django_redis import get_redis_connection

    assert get_redis_connection("default").exists(cache.make_key("probe"))


def test_anonymous_limit_then_429_with_retry_after(api, dataset, settings, ip):
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


def test_a_key_raises_the_limit(api, dataset, settings, ip):
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
    forged = api_key.prefix + ".x" + key.split(".", 1)[1][1:]
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
