"""DELETE /webhooks/{id} while the dispatcher records an attempt of one of the endpoint's
deliveries: both take their locks in one order (the endpoint, then its deliveries), so neither
deadlocks; the attempt is deleted with its delivery, never left pointing at a deleted one (a
foreign-key violation at the delete's commit, answered 500)."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection
from django.utils import timezone

from tests.webhooks.conftest import register
from webhooks import services
from webhooks.models import Attempt, Delivery, Endpoint, OutboxEvent
from webhooks.outbox import outbox_ping, payload
from webhooks.sending import AttemptResult
from webhooks.services import Finished, deliveries_record_attempts

pytestmark = pytest.mark.django_db(transaction=True)


def _endpoint_with_a_delivery(keyed, receiver) -> tuple[Endpoint, Delivery]:
    endpoint = Endpoint.objects.get(public_id=register(keyed, receiver().url())["id"])
    event = OutboxEvent.objects.create(
        event_id="evt_lock_order",
        type="deposit",
        payload=payload("evt_lock_order", "deposit", {}),
        fanned_out_at=timezone.now(),
    )
    return endpoint, Delivery.objects.create(endpoint=endpoint, event=event, next_attempt_at=None)


def _in_thread(work, errors: list[BaseException]) -> threading.Thread:
    def run() -> None:
        try:
            work()
        except BaseException as exc:  # reported by the test
            errors.append(exc)
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


@pytest.mark.parametrize("status", [200, 500], ids=["delivered", "failed"])
def test_a_delete_while_an_attempt_is_recorded_waits_for_it(keyed, receiver, monkeypatch, status):
    """The recording holds its locks (the endpoint, then the delivery) when the delete comes:
    the delete waits, then deletes the delivery with the attempt just recorded. A failed
    attempt writes the endpoint's failing state too. Neither deadlocks nor errs."""
    endpoint, delivery = _endpoint_with_a_delivery(keyed, receiver)
    locked, go = threading.Event(), threading.Event()
    write = services._deliveries_update

    def held(*args, **kwargs):
        locked.set()  # the recording's locks are taken by now
        assert go.wait(10)
        return write(*args, **kwargs)

    monkeypatch.setattr(services, "_deliveries_update", held)
    errors: list[BaseException] = []
    recorded: list[dict[int, str]] = []
    result = AttemptResult(status, "", 5, "")
    finished = [Finished(delivery.id, timezone.now(), result)]
    recorder = _in_thread(
        lambda: recorded.append(deliveries_record_attempts(finished=finished)), errors
    )
    assert locked.wait(10)
    answers: list[int] = []
    deleter = _in_thread(
        lambda: answers.append(keyed.delete(f"/webhooks/{endpoint.public_id}").status_code),
        errors,
    )
    time.sleep(0.5)  # the delete reaches the endpoint's lock
    go.set()
    recorder.join(20)
    deleter.join(20)
    assert errors == []
    expected = "delivered" if status == 200 else "pending"  # a 500 is tried again
    assert recorded == [{delivery.id: expected}]
    assert answers == [204]
    assert not Endpoint.objects.filter(id=endpoint.id).exists()
    assert not Delivery.objects.filter(id=delivery.id).exists()
    assert not Attempt.objects.filter(delivery_id=delivery.id).exists()


@pytest.mark.parametrize("status", [200, 500], ids=["delivered", "failed"])
def test_an_attempt_recorded_while_a_delete_holds_its_locks_is_let_go(
    keyed, receiver, monkeypatch, status
):
    """The delete holds the endpoint and its deliveries when the attempt's recording comes: the
    recording waits for the endpoint, then finds its delivery gone and records nothing."""
    endpoint, delivery = _endpoint_with_a_delivery(keyed, receiver)
    locked, go = threading.Event(), threading.Event()
    lock_rows = services._lock_rows

    def held(*args, **kwargs):
        lock_rows(*args, **kwargs)
        locked.set()  # the endpoint and its deliveries are locked by now
        assert go.wait(10)

    monkeypatch.setattr(services, "_lock_rows", held)
    errors: list[BaseException] = []
    answers: list[int] = []
    deleter = _in_thread(
        lambda: answers.append(keyed.delete(f"/webhooks/{endpoint.public_id}").status_code),
        errors,
    )
    assert locked.wait(10)
    recorded: list[dict[int, str]] = []
    finished = [Finished(delivery.id, timezone.now(), AttemptResult(status, "", 5, ""))]
    recorder = _in_thread(
        lambda: recorded.append(deliveries_record_attempts(finished=finished)), errors
    )
    time.sleep(0.5)  # the recording reaches the endpoint's lock
    go.set()
    deleter.join(20)
    recorder.join(20)
    assert errors == []
    assert answers == [204]
    assert recorded == [{}]
    assert not Endpoint.objects.filter(id=endpoint.id).exists()
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
