"""DELETE /webhooks/{id} while the dispatcher records an attempt of one of the endpoint's
deliveries: the attempt is deleted with its delivery, not left pointing at a deleted one (a
foreign-key violation at the delete's commit, answered 500)."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection, transaction
from django.utils import timezone

from tests.webhooks.conftest import register
from webhooks.models import Attempt, Delivery, Endpoint, OutboxEvent
from webhooks.outbox import payload
from webhooks.sending import AttemptResult
from webhooks.services import delivery_record_attempt

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_delete_while_an_attempt_is_recorded_deletes_both(keyed, receiver):
    endpoint = Endpoint.objects.get(public_id=register(keyed, receiver().url())["id"])
    event = OutboxEvent.objects.create(
        event_id="evt_31337_0x01_0",
        type="deposit",
        payload=payload("evt_31337_0x01_0", "deposit", {}),
        fanned_out_at=timezone.now(),
    )
    delivery = Delivery.objects.create(endpoint=endpoint, event=event, next_attempt_at=None)
    locked, go = threading.Event(), threading.Event()

    def record() -> None:
        """The dispatcher's recording of an attempt, held between its lock and its insert."""
        try:
            with transaction.atomic():
                Delivery.objects.select_for_update().get(id=delivery.id)
                locked.set()
                go.wait(10)
                result = AttemptResult(200, "", 5, "ok")
                delivery_record_attempt(delivery_id=delivery.id, at=timezone.now(), result=result)
        finally:
            connection.close()

    recorder = threading.Thread(target=record)
    recorder.start()
    assert locked.wait(10)
    answers: list[int] = []

    def delete() -> None:
        try:
            answers.append(keyed.delete(f"/webhooks/{endpoint.public_id}").status_code)
        finally:
            connection.close()

    deleter = threading.Thread(target=delete)
    deleter.start()
    time.sleep(0.5)  # the delete reaches the delivery's lock
    go.set()
    recorder.join(20)
    deleter.join(20)
    assert answers == [204]
    assert not Endpoint.objects.filter(id=endpoint.id).exists()
    assert not Delivery.objects.filter(id=delivery.id).exists()
    assert not Attempt.objects.filter(delivery_id=delivery.id).exists()
