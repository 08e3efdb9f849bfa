"""Who may enable an endpoint again (extensions.md, "Webhooks"): one that staff disabled only
staff, in admin, where "Disabled by ..." stays; one its key paused, or the service disabled
after every delivery failed, its key. A disabled or expired key is refused on every operation;
what happens while an endpoint is paused is not kept for it (README, "Webhooks")."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone
from rest_framework_api_key.models import APIKey

from tests.adminpages import change_url, changelist_url, form_data
from tests.webhooks.conftest import register
from tests.webhooks.receivers import Answer
from tests.webhooks.test_api import OPERATIONS, error
from tests.webhooks.test_delivery import announce
from webhooks.dispatcher import Dispatcher
from webhooks.models import Delivery, Endpoint
from webhooks.sending import AttemptResult
from webhooks.services import delivery_record_attempt, outbox_fan_out

pytestmark = pytest.mark.django_db

STAFF_ONLY = (
    "This webhook endpoint was disabled by the service's staff: only they can enable it again."
)


def disabled_by(keyed, url: str) -> str | None:
    """Who disabled the endpoint, as its key reads it."""
    return keyed.get(url).json()["data"]["disabledBy"]


def staff_action(admin_client, action: str, endpoint: Endpoint) -> None:
    response = admin_client.post(
        changelist_url(Endpoint), {"action": action, "_selected_action": [endpoint.pk]}
    )
    assert response.status_code == 302, response.content


def test_an_endpoint_staff_disabled_is_enabled_again_by_staff_only(
    keyed, receiver, admin_client, admin_user
):
    server = receiver()
    created = register(keyed, server.url())
    endpoint = Endpoint.objects.get(public_id=created["id"])
    staff_action(admin_client, "disable", endpoint)
    reason = f"Disabled by {admin_user}."
    url = f"/webhooks/{created['id']}"

    message = error(keyed.patch(url, {"enabled": True}, format="json"), 403, "forbidden")
    assert message == STAFF_ONLY
    assert disabled_by(keyed, url) == "staff"
    # All or nothing: the other members of a refused PATCH are not applied either.
    body = {"enabled": True, "description": "let me in"}
    error(keyed.patch(url, body, format="json"), 403, "forbidden")
    # Pausing it, or changing anything else, is the key's to do; the staff's reason stays.
    assert keyed.patch(url, {"enabled": False}, format="json").status_code == 200
    changed = keyed.patch(url, {"description": "bot"}, format="json")
    assert (changed.status_code, changed.json()["data"]["enabled"]) == (200, False)
    assert changed.json()["data"]["disabledBy"] == "staff"  # pausing it changed nothing
    # A test ping is not a way around it: nothing is sent.
    error(keyed.post(f"{url}/test"), 403, "forbidden")
    assert server.received == []
    endpoint.refresh_from_db()
    assert (endpoint.enabled, endpoint.disabled_reason, endpoint.description) == (
        False,
        reason,
        "bot",
    )
    page = admin_client.get(change_url(endpoint)).content.decode()
    assert reason in page

    staff_action(admin_client, "enable", endpoint)
    endpoint.refresh_from_db()
    assert (endpoint.enabled, endpoint.disabled_reason) == (True, "")
    assert disabled_by(keyed, url) is None
    # Enabled by staff, it is the key's again.
    paused = keyed.patch(url, {"enabled": False}, format="json").json()["data"]
    assert (paused["enabled"], paused["disabledBy"]) == (False, "key")
    enabled = keyed.patch(url, {"enabled": True}, format="json").json()["data"]
    assert (enabled["enabled"], enabled["disabledBy"]) == (True, None)


def test_staff_disabling_in_the_change_form_is_staff_disabling(
    keyed, receiver, admin_client, admin_user
):
    """Unticking `enabled` on the endpoint's page is the same as the action; the reason is not
    a field staff can clear by hand."""
    created = register(keyed, receiver().url())
    endpoint = Endpoint.objects.get(public_id=created["id"])
    page = admin_client.get(change_url(endpoint))
    data = form_data(page)
    assert "disabled_reason" not in data  # shown, not editable
    del data["enabled"]  # unticked
    assert admin_client.post(change_url(endpoint), data).status_code == 302
    endpoint.refresh_from_db()
    assert (endpoint.enabled, endpoint.disabled_reason) == (False, f"Disabled by {admin_user}.")
    assert disabled_by(keyed, f"/webhooks/{created['id']}") == "staff"
    error(
        keyed.patch(f"/webhooks/{created['id']}", {"enabled": True}, format="json"),
        403,
        "forbidden",
    )
    data["enabled"] = "on"
    assert admin_client.post(change_url(endpoint), data).status_code == 302
    endpoint.refresh_from_db()
    assert (endpoint.enabled, endpoint.disabled_reason) == (True, "")


def test_an_endpoint_the_service_disabled_is_enabled_again_by_its_key(keyed, receiver, settings):
    """Disabled after every delivery failed for WEBHOOK_DISABLE_AFTER: its key may enable it,
    and it starts afresh (not disabled again at its next failure)."""
    settings.WEBHOOK_DISABLE_AFTER = 60
    created = register(keyed, receiver().url())
    endpoint = Endpoint.objects.get(public_id=created["id"])
    Endpoint.objects.filter(id=endpoint.id).update(
        failing_since=timezone.now() - dt.timedelta(seconds=61)
    )
    announce()
    outbox_fan_out()
    failed = AttemptResult(503, "", 5, "")
    delivery_record_attempt(delivery_id=Delivery.objects.get().id, at=timezone.now(), result=failed)
    endpoint.refresh_from_db()
    assert endpoint.enabled is False
    assert endpoint.disabled_reason.startswith("Every delivery failed for ")
    assert disabled_by(keyed, f"/webhooks/{created['id']}") == "service"
    answer = keyed.patch(f"/webhooks/{created['id']}", {"enabled": True}, format="json")
    assert (answer.status_code, answer.json()["data"]["disabledBy"]) == (200, None)
    endpoint.refresh_from_db()
    assert (endpoint.enabled, endpoint.disabled_reason, endpoint.failing_since) == (True, "", None)


@pytest.mark.parametrize(("method", "path"), OPERATIONS)
def test_an_expired_key_is_refused_on_every_operation(api, keyed, receiver, method, path):
    created = register(keyed, receiver().url())
    _, expired = APIKey.objects.create_key(
        name="expired", expiry_date=timezone.now() - dt.timedelta(seconds=1)
    )
    api.credentials(HTTP_X_API_TOKEN=expired)
    url = f"/webhooks/{created['id']}{path}"
    message = error(getattr(api, method)(url, {}, format="json"), 403, "forbidden")
    assert message == "The API key in X-API-Token has expired."


def test_a_revoked_keys_endpoints_are_its_again_once_it_is_enabled(keyed, key, receiver):
    """While the key is revoked its endpoints answer 403 (the key's, not the endpoint's, state);
    enabled again, they are as they were."""
    created = register(keyed, receiver().url())
    APIKey.objects.filter(id=key[0].id).update(revoked=True)
    error(keyed.get(f"/webhooks/{created['id']}"), 403, "forbidden")
    error(
        keyed.patch(f"/webhooks/{created['id']}", {"enabled": True}, format="json"),
        403,
        "forbidden",
    )
    APIKey.objects.filter(id=key[0].id).update(revoked=False)
    assert keyed.get(f"/webhooks/{created['id']}").json()["data"]["enabled"] is True


def test_what_happens_while_an_endpoint_is_paused_is_not_kept_for_it(keyed, receiver):
    """README: pausing an endpoint drops what happens meanwhile; deliveries already pending when
    it was paused wait, and are sent once it is enabled again."""
    server = receiver(Answer(503), Answer(200))
    created = register(keyed, server.url())
    url = f"/webhooks/{created['id']}"
    before, *_ = announce()
    dispatcher = Dispatcher(workers=2, per_endpoint=1)
    try:
        dispatcher.drain(until=lambda: len(server.received) == 1)  # 503: to be retried
        assert keyed.patch(url, {"enabled": False}, format="json").status_code == 200
        (during,) = announce()
        dispatcher.drain()
        assert server.ids() == [before.event_id]
        assert not Delivery.objects.filter(event=during).exists()
        assert keyed.patch(url, {"enabled": True}, format="json").status_code == 200
        (after,) = announce()
        dispatcher.drain(until=lambda: len(server.received) == 3)
    finally:
        dispatcher.close()
    assert sorted(server.ids()) == sorted([before.event_id, before.event_id, after.event_id])
    assert during.event_id not in server.ids()
