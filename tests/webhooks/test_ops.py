"""What ops see of the webhooks: the Prometheus metrics, the log lines with the event and
delivery ids, and `lat_apikey create`."""

from __future__ import annotations

import io
import logging

import pytest
from django.core.management import call_command
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient
from rest_framework_api_key.models import APIKey

from tests.latsite.test_prometheus import delta, scrape, value
from tests.webhooks.conftest import register
from tests.webhooks.receivers import Answer
from tests.webhooks.test_delivery import announce
from webhooks.dispatcher import Dispatcher
from webhooks.models import Delivery, Endpoint, OutboxEvent
from webhooks.services import outbox_fan_out

pytestmark = pytest.mark.django_db


def test_metrics_count_outcomes_and_show_the_queue(keyed, receiver):
    server = receiver(Answer(500), Answer(200))
    register(keyed, server.url())
    before = scrape()
    announce(2)
    queued = scrape()
    assert value(queued, "lat_webhook_queue_depth", stage="outbox") == 2
    assert value(queued, "lat_webhook_oldest_pending_seconds") >= 0
    dispatcher = Dispatcher(workers=2, per_endpoint=1)
    try:
        dispatcher.drain(until=lambda: Delivery.objects.filter(status="delivered").count() == 2)
    finally:
        dispatcher.close()
    after = scrape()
    assert delta(before, after, "lat_webhook_deliveries_total", outcome="delivered") == 2
    assert delta(before, after, "lat_webhook_deliveries_total", outcome="retry") == 1
    assert delta(before, after, "lat_webhook_attempt_duration_seconds_count") == 3
    assert value(after, "lat_webhook_queue_depth", stage="outbox") == 0
    assert value(after, "lat_webhook_queue_depth", stage="deliveries") == 0


def test_deliveries_that_cannot_be_sent_are_held_not_queued(keyed, key, receiver):
    """A disabled endpoint's deliveries, and those of a revoked key's endpoint, are `held`."""
    paused = register(keyed, receiver().url())
    register(keyed, receiver().url())
    keyed.patch(f"/webhooks/{paused['id']}", {"enabled": False}, format="json")
    announce(1)
    outbox_fan_out()  # to the enabled endpoint only
    Delivery.objects.create(
        endpoint=Endpoint.objects.get(public_id=paused["id"]),
        event=OutboxEvent.objects.get(),
        next_attempt_at=timezone.now(),
    )
    queued = scrape()
    assert value(queued, "lat_webhook_queue_depth", stage="deliveries") == 1
    assert value(queued, "lat_webhook_queue_depth", stage="held") == 1
    APIKey.objects.filter(id=key[0].id).update(revoked=True)
    revoked = scrape()
    assert value(revoked, "lat_webhook_queue_depth", stage="deliveries") == 0
    assert value(revoked, "lat_webhook_queue_depth", stage="held") == 2


def test_attempts_are_logged_with_the_event_and_delivery_ids(keyed, receiver, caplog):
    server = receiver()
    register(keyed, server.url())
    (event,) = announce()
    caplog.set_level(logging.INFO, logger="webhooks")
    dispatcher = Dispatcher(workers=1, per_endpoint=1)
    try:
        dispatcher.drain()
    finally:
        dispatcher.close()
    (record,) = [r for r in caplog.records if r.getMessage() == "webhook attempt"]
    delivery = Delivery.objects.get()
    assert record.event_id == event.event_id  # type: ignore[attr-defined]
    assert record.delivery_id == delivery.id  # type: ignore[attr-defined]
    assert record.status_code == 200  # type: ignore[attr-defined]
    assert record.outcome == "delivered"  # type: ignore[attr-defined]


def test_lat_apikey_create_prints_a_key_once(db):
    out = io.StringIO()
    call_command("lat_apikey", "create", "--name", "ops script", stdout=out)
    key = out.getvalue().strip()
    stored = APIKey.objects.get(name="ops script")
    assert stored.is_valid(key)
    assert key not in stored.hashed_key
    client = APIClient()
    client.credentials(HTTP_X_API_TOKEN=key)
    assert client.get("/webhooks").json() == {"data": []}
    assert Client().get("/webhooks").status_code == 401
