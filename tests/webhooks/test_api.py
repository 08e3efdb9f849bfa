"""The webhook endpoints' API (extensions.md, "Webhooks"): tied to the key that made them,
the secret shown once, the URL rules at registration, the error body on every refusal."""

from __future__ import annotations

import base64
import re

import pytest
from rest_framework.test import APIClient
from rest_framework_api_key.models import APIKey

from tests.webhooks.conftest import register
from tests.webhooks.receivers import Answer
from webhooks.models import Delivery, Endpoint, OutboxEvent

pytestmark = pytest.mark.django_db

LAT = "0x5FbDB2315678afecb367f032d93F642f64180aa3"


def error(response, status: int, code: str) -> str:
    assert response.status_code == status, response.content
    body = response.json()["error"]
    assert body["code"] == code
    return body["message"]


def test_create_shows_the_secret_once_then_lists_reads_updates_deletes(keyed, receiver):
    server = receiver()
    created = register(
        keyed,
        server.url(),
        types=["deposit", "statusChanged"],
        lats=[LAT.lower()],
        wallets=["0x" + "AB" * 20],
        description="bot",
    )
    assert re.fullmatch(r"whsec_[A-Za-z0-9+/]{43}=", created["secret"])
    assert len(base64.b64decode(created["secret"][6:])) == 32
    assert created["lats"] == [LAT]  # checksummed
    assert created["wallets"] == ["0x" + "ab" * 20]
    assert created["types"] == ["deposit", "statusChanged"]
    assert (created["enabled"], created["disabledBy"]) == (True, None)
    endpoint_id = created["id"]

    listed = keyed.get("/webhooks").json()["data"]
    assert [e["id"] for e in listed] == [endpoint_id]
    assert "secret" not in listed[0]
    read = keyed.get(f"/webhooks/{endpoint_id}").json()["data"]
    assert read == {k: v for k, v in created.items() if k != "secret"}

    patched = keyed.patch(
        f"/webhooks/{endpoint_id}", {"types": [], "enabled": False}, format="json"
    ).json()["data"]
    assert (patched["types"], patched["enabled"], patched["url"]) == ([], False, server.url())
    assert patched["disabledBy"] == "key"
    unchanged = keyed.patch(f"/webhooks/{endpoint_id}")  # no body at all
    assert unchanged.status_code == 200
    assert unchanged.json()["data"] == patched

    assert keyed.delete(f"/webhooks/{endpoint_id}").status_code == 204
    error(keyed.get(f"/webhooks/{endpoint_id}"), 404, "not_found")
    assert not Endpoint.objects.exists()


def test_rotation_answers_a_new_secret_and_keeps_the_old_one_for_a_day(keyed, receiver):
    created = register(keyed, receiver().url())
    rotated = keyed.post(f"/webhooks/{created['id']}/rotate-secret").json()["data"]
    assert rotated["secret"] != created["secret"]
    endpoint = Endpoint.objects.get()
    assert (endpoint.secret, endpoint.previous_secret) == (rotated["secret"], created["secret"])
    hours = (endpoint.previous_secret_until - endpoint.updated_at).total_seconds() / 3600
    assert 23.99 < hours <= 24


def test_no_key_is_a_401_and_an_unknown_key_too(api, receiver):
    url = receiver().url()
    for response in (api.get("/webhooks"), api.post("/webhooks", {"url": url}, format="json")):
        error(response, 401, "unauthorized")
        assert response["WWW-Authenticate"] == 'ApiKey header="X-API-Token"'
    api.credentials(HTTP_X_API_TOKEN="nope.nope")
    error(api.get("/webhooks"), 401, "unauthorized")


OPERATIONS = [
    ("get", ""),
    ("patch", ""),
    ("delete", ""),
    ("post", "/rotate-secret"),
    ("post", "/test"),
    ("get", "/deliveries"),
    ("post", "/deliveries/1/retry"),
]


@pytest.mark.parametrize(("method", "path"), OPERATIONS)
def test_every_operation_needs_a_valid_key(api, keyed, receiver, method, path):
    created = register(keyed, receiver().url())
    url = f"/webhooks/{created['id']}{path}"
    error(getattr(api, method)(url, {}, format="json"), 401, "unauthorized")
    api.credentials(HTTP_X_API_TOKEN="Abcd1234.notasecretatall0000000000000000")
    error(getattr(api, method)(url, {}, format="json"), 401, "unauthorized")
    _, revoked = APIKey.objects.create_key(name="revoked", revoked=True)
    api.credentials(HTTP_X_API_TOKEN=revoked)
    error(getattr(api, method)(url, {}, format="json"), 403, "forbidden")
    assert Endpoint.objects.get().secret == created["secret"]


def test_another_keys_endpoint_is_a_404(keyed, receiver):
    created = register(keyed, receiver().url())
    other = APIClient()
    other.credentials(HTTP_X_API_TOKEN=APIKey.objects.create_key(name="other")[1])
    assert other.get("/webhooks").json()["data"] == []
    for method, path in [
        ("get", ""),
        ("patch", ""),
        ("delete", ""),
        ("post", "/rotate-secret"),
        ("post", "/test"),
        ("get", "/deliveries"),
    ]:
        response = getattr(other, method)(f"/webhooks/{created['id']}{path}", {}, format="json")
        error(response, 404, "not_found")
    assert Endpoint.objects.get().secret == created["secret"]


def test_at_most_webhooks_per_key(keyed, receiver, settings):
    settings.WEBHOOKS_PER_KEY = 2
    url = receiver().url()
    register(keyed, url)
    register(keyed, url)
    message = error(
        keyed.post("/webhooks", {"url": url}, format="json"), 422, "unprocessable_entity"
    )
    assert "at most 2" in message


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "url is required"),
        ({"url": 5}, "url must be a string"),
        ({"url": "https://example.com", "types": ["nope"]}, "types must hold only"),
        ({"url": "https://example.com", "lats": ["0x12"]}, "lats[0] must be an address"),
        ({"url": "https://example.com", "wallets": "0x12"}, "wallets must be an array"),
    ],
)
def test_invalid_members_are_a_422_naming_the_field(keyed, body, field):
    message = error(keyed.post("/webhooks", body, format="json"), 422, "unprocessable_entity")
    assert field in message


def test_a_body_that_is_not_a_json_object_is_a_400(keyed):
    error(keyed.post("/webhooks", "[1]", content_type="application/json"), 400, "bad_request")
    error(keyed.post("/webhooks", "{", content_type="application/json"), 400, "bad_request")


@pytest.mark.parametrize(
    ("url", "rule"),
    [
        ("http://example.com/hook", "https only"),
        ("https://127.0.0.1/hook", "public addresses only"),
        ("https://localhost/hook", "public addresses only"),
        ("https://10.1.2.3/hook", "public addresses only"),
        ("https://192.168.0.1/hook", "public addresses only"),
        ("https://[::1]/hook", "public addresses only"),
        ("https://[::127.0.0.1]/hook", "public addresses only"),
        ("https://[::ffff:0:127.0.0.1]/hook", "public addresses only"),
        ("https://[64:ff9b:1::a00:1]/hook", "public addresses only"),
        ("https://[fec0::1]/hook", "public addresses only"),
        ("https://169.254.169.254/latest", "public addresses only"),
        ("https://8.8.8.8:8443/hook", "ports 443 and 80"),
        ("https://user:pw@8.8.8.8/hook", "no credentials"),
        ("ftp://8.8.8.8/hook", "https only"),
    ],
)
def test_registration_refuses_urls_breaking_a_rule(keyed, url, rule):
    """With the settings off (production)."""
    for response in (keyed.post("/webhooks", {"url": url}, format="json"),):
        message = error(response, 422, "unprocessable_entity")
        assert message.startswith("url: ")
        assert rule in message
    assert not Endpoint.objects.exists()


def test_registration_refuses_a_url_that_redirects(keyed, receiver):
    """Asked with a HEAD when registered: a redirect, which no attempt would follow, is refused;
    a receiver that takes nothing but POST is not."""
    target = receiver()
    redirecting = receiver(Answer(301, headers={"Location": target.url()}))
    redirecting.head_answers = True
    message = error(
        keyed.post("/webhooks", {"url": redirecting.url()}, format="json"),
        422,
        "unprocessable_entity",
    )
    assert message.startswith("url: ")
    assert "no redirects" in message
    assert not Endpoint.objects.exists()
    register(keyed, target.url())  # answers HEAD with 501


def test_patch_checks_the_url_too(keyed, receiver, settings):
    created = register(keyed, receiver().url())
    settings.WEBHOOK_ALLOW_PRIVATE_HOSTS = False
    response = keyed.patch(
        f"/webhooks/{created['id']}", {"url": "http://127.0.0.1/x"}, format="json"
    )
    assert "public addresses only" in error(response, 422, "unprocessable_entity")
    assert Endpoint.objects.get().url == created["url"]


def test_deliveries_newest_first_by_cursor_with_attempts(
    keyed, receiver, django_assert_max_num_queries
):
    created = register(keyed, receiver().url())
    endpoint = Endpoint.objects.get()
    events = [
        OutboxEvent.objects.create(event_id=f"evt_{i}", type="deposit", payload={"id": f"evt_{i}"})
        for i in range(5)
    ]
    deliveries = [Delivery.objects.create(endpoint=endpoint, event=e) for e in events]
    for d in deliveries:
        for status in (500, 200):
            d.attempts.create(at=d.created_at, status_code=status, duration_ms=3)
    seen = []
    cursor = None
    for _ in range(3):
        params = {"take": 2, **({"cursor": cursor} if cursor else {})}
        with django_assert_max_num_queries(8):
            body = keyed.get(f"/webhooks/{created['id']}/deliveries", params).json()
        seen += body["data"]
        cursor = body["meta"]["next"]
        if cursor is None:
            break
    assert [d["id"] for d in seen] == [d.id for d in reversed(deliveries)]
    assert [d["eventId"] for d in seen] == [f"evt_{i}" for i in reversed(range(5))]
    assert len(seen[0]["attempts"]) == 2
    bad = keyed.get(f"/webhooks/{created['id']}/deliveries", {"cursor": "zz"})
    error(bad, 422, "unprocessable_entity")


def test_retry_one_delivery(keyed, receiver):
    created = register(keyed, receiver().url())
    endpoint = Endpoint.objects.get()
    event = OutboxEvent.objects.create(event_id="evt_1", type="deposit", payload={"id": "evt_1"})
    delivery = Delivery.objects.create(
        endpoint=endpoint, event=event, status=Delivery.Status.FAILED, attempt_count=11
    )
    body = keyed.post(f"/webhooks/{created['id']}/deliveries/{delivery.id}/retry").json()
    assert body["data"]["status"] == "pending"
    assert body["data"]["nextAttemptAt"] is not None
    error(keyed.post(f"/webhooks/{created['id']}/deliveries/999999/retry"), 404, "not_found")
    error(
        keyed.post(f"/webhooks/{created['id']}/deliveries/99999999999999999999/retry"),
        404,
        "not_found",
    )
