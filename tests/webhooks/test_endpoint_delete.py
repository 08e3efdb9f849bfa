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
from webhooks.outbox import outbox_ping, payload
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


def test_a_delete_while_a_failed_attempt_is_recorded_takes_the_locks_in_its_order(keyed, receiver):
    """A failed attempt locks its delivery, then its endpoint (failing since); the delete takes
    them in the same order, so neither waits for the other for ever (a deadlock PostgreSQL
    breaks by failing one of them)."""
    endpoint = Endpoint.objects.get(public_id=register(keyed, receiver().url())["id"])
    event = OutboxEvent.objects.create(
        event_id="evt_lock_order",
        type="deposit",
        payload=payload("evt_lock_order", "deposit", {}),
        fanned_out_at=timezone.now(),
    )
    delivery = Delivery.objects.create(endpoint=endpoint, event=event, next_attempt_at=None)
    locked, go = threading.Event(), threading.Event()
    recorded: list[BaseException | str] = []

    def record() -> None:
        try:
            with transaction.atomic():
                Delivery.objects.select_for_update().get(id=delivery.id)
                locked.set()
                go.wait(10)
                result = AttemptResult(500, "", 5, "no")
                delivery_record_attempt(delivery_id=delivery.id, at=timezone.now(), result=result)
            recorded.append("committed")
        except BaseException as exc:  # reported by the test
            recorded.append(exc)
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
    time.sleep(0.5)  # the delete waits for the delivery's lock
    go.set()
    recorder.join(20)
    deleter.join(20)
    assert recorded == ["committed"]
    assert answers == [204]
    assert not Endpoint.objects.filter(id=endpoint.id).exists()
    assert not Delivery.objects.filter(id=delivery.id).exists()
    assert not Attempt.objects.filter(delivery_id=delivery.id).exists()


def test_a_delete_does_not_read_the_endpoints_deliveries(
    keyed, receiver, django_assert_max_num_queries
):
    """The deliveries, their attempts and the endpoint's pings are deleted by the database:
    the same few statements for 300 deliveries as for none."""
    endpoint = Endpoint.objects.get(public_id=register(keyed, receiver().url())["id"])
    other = Endpoint.objects.get(public_id=register(keyed, receiver().url())["id"])
    now = timezone.now()
    events = OutboxEvent.objects.bulk_create(
        OutboxEvent(event_id=f"evt_many_{i}", type="deposit", payload={}, fanned_out_at=now)
        for i in range(300)
    )
    for target in (endpoint, other):
        made = Delivery.objects.bulk_create(
            Delivery(endpoint=target, event=e, status="delivered") for e in events
        )
        Attempt.objects.bulk_create(
            Attempt(delivery=d, at=now, status_code=200, duration_ms=1) for d in made
        )
    outbox_ping(endpoint=endpoint)
    with django_assert_max_num_queries(20):
        assert keyed.delete(f"/webhooks/{endpoint.public_id}").status_code == 204
    assert not Delivery.objects.filter(endpoint_id=endpoint.id).exists()
    assert not Attempt.objects.filter(delivery__endpoint_id=endpoint.id).exists()
    assert not OutboxEvent.objects.filter(endpoint_id=endpoint.id).exists()
    assert Delivery.objects.filter(endpoint=other).count() == 300  # another's are kept
    assert Attempt.objects.filter(delivery__endpoint=other).count() == 300
    assert OutboxEvent.objects.filter(type="deposit").count() == 300
    # Staff still see who deleted it: the endpoint's history records the deletion.
    assert endpoint.history.model.objects.filter(id=endpoint.id, history_type="-").exists()
