"""Delivery to real receivers on loopback: signatures the `standardwebhooks` package verifies,
the retry schedule (shrunk to fractions of a second), Retry-After, final answers, rotation, a
slow endpoint beside fast ones, a dispatcher that dies mid-attempt, and the URL rules again at
every attempt."""

from __future__ import annotations

import itertools
import socket
import threading
import time
from typing import Any

import pytest
from django.db import transaction
from django.utils import timezone
from standardwebhooks.webhooks import WebhookVerificationError

from tests.resolver import FakeResolver
from tests.webhooks.conftest import register
from tests.webhooks.receivers import Answer
from webhooks.dispatcher import Dispatcher
from webhooks.models import Attempt, Delivery, Endpoint, OutboxEvent
from webhooks.outbox import outbox_events_removing, payload
from webhooks.services import outbox_fan_out

pytestmark = pytest.mark.django_db


_serial = itertools.count()


def announce(
    n: int = 1, kind: str = "deposit", ids: list[str] | None = None, **fields: Any
) -> list[OutboxEvent]:
    """Outbox rows as the indexer writes them (data shaped as the feed's)."""
    out = []
    for i in range(n):
        message_id = ids[i] if ids else f"evt_31337_0x{next(_serial):064x}_{i}"
        data = {"type": kind, "blockNumber": 10 + i, "logIndex": i, "args": {}, "chainId": 31337}
        out.append(
            OutboxEvent.objects.create(
                event_id=message_id, type=kind, payload=payload(message_id, kind, data), **fields
            )
        )
    return out


@pytest.fixture
def dispatcher():
    running = Dispatcher(workers=8, per_endpoint=2)
    yield running
    running.close()


def test_each_event_reaches_the_endpoint_once_signed(keyed, receiver, dispatcher):
    server = receiver()
    secret = register(keyed, server.url())["secret"]
    events = announce(3)
    dispatcher.drain()
    assert sorted(server.ids()) == sorted(e.event_id for e in events)
    for received in server.received:
        body = received.verify(secret)  # standardwebhooks: raises unless the signature holds
        assert body["id"] == received.id
        assert set(body) == {"id", "type", "createdAt", "data"}
        assert received.headers["content-type"] == "application/json"
        assert abs(int(received.headers["webhook-timestamp"]) - time.time()) < 5
    with pytest.raises(WebhookVerificationError):
        server.received[0].verify("whsec_" + "A" * 43 + "=")
    assert set(Delivery.objects.values_list("status", flat=True)) == {"delivered"}
    dispatcher.drain()
    assert len(server.received) == 3  # nothing sent twice


def test_500_then_200_sends_the_same_id_again_on_the_schedule(keyed, receiver, dispatcher):
    server = receiver(Answer(500), Answer(503), Answer(200))
    register(keyed, server.url())
    (event,) = announce()
    dispatcher.drain(until=lambda: Delivery.objects.filter(status="delivered").exists())
    assert server.ids() == [event.event_id] * 3
    first, second, third = (r.at for r in server.received)
    # 0.2 s and 0.4 s after the first attempt (WEBHOOK_RETRY_SCHEDULE in the fixture).
    assert 0.18 <= second - first < 0.4
    assert 0.38 <= third - first < 0.7
    delivery = Delivery.objects.get()
    assert [a.status_code for a in delivery.attempts.order_by("at")] == [500, 503, 200]


def test_a_400_is_final(keyed, receiver, dispatcher):
    server = receiver(Answer(400, body=b"no such thing"))
    register(keyed, server.url())
    announce()
    dispatcher.drain()
    time.sleep(0.5)
    dispatcher.drain()
    assert len(server.received) == 1
    delivery = Delivery.objects.get()
    assert (delivery.status, delivery.last_status_code) == ("failed", 400)
    assert delivery.attempts.get().response_head == "no such thing"


def test_an_answer_with_nul_bytes_is_recorded(keyed, receiver, dispatcher):
    """PostgreSQL's text takes no NUL: the answer's head is kept with U+FFFD in their place,
    and the batch it is recorded in is not lost to it."""
    server, other = receiver(Answer(400, body=b"bad\x00input")), receiver()
    register(keyed, server.url())
    register(keyed, other.url())
    announce()
    dispatcher.drain()
    assert Attempt.objects.get(delivery__endpoint__url=server.url()).response_head == (
        "bad\ufffdinput"
    )
    assert Delivery.objects.get(endpoint__url=other.url()).status == "delivered"


def test_the_schedule_ends_in_a_final_failure(keyed, receiver, dispatcher):
    server = receiver(Answer(500))
    register(keyed, server.url())
    announce()
    dispatcher.drain(until=lambda: Delivery.objects.filter(status="failed").exists())
    assert len(server.received) == 4  # the first attempt and the schedule's three
    assert Delivery.objects.get().next_attempt_at is None


def test_retry_after_of_a_429_is_honoured(keyed, receiver, dispatcher):
    server = receiver(Answer(429, headers={"Retry-After": "1"}), Answer(200))
    register(keyed, server.url())
    announce()
    dispatcher.drain(until=lambda: Delivery.objects.filter(status="delivered").exists())
    first, second = (r.at for r in server.received)
    assert second - first >= 1.0  # not at 0.2 s, the schedule's first retry


def test_a_rotation_signs_with_both_secrets(keyed, receiver, dispatcher):
    server = receiver()
    created = register(keyed, server.url())
    new = keyed.post(f"/webhooks/{created['id']}/rotate-secret").json()["data"]["secret"]
    announce()
    dispatcher.drain()
    (received,) = server.received
    signatures = received.headers["webhook-signature"].split(" ")
    assert len(signatures) == 2
    assert all(s.startswith("v1,") for s in signatures)
    received.verify(created["secret"])
    received.verify(new)
    # A day later only the new secret signs.
    Endpoint.objects.update(previous_secret_until=timezone.now())
    announce(1, kind="transfer")
    dispatcher.drain()
    later = server.received[-1]
    assert len(later.headers["webhook-signature"].split(" ")) == 1
    later.verify(new)
    with pytest.raises(WebhookVerificationError):
        later.verify(created["secret"])


def test_test_ping_answers_with_its_attempt(keyed, receiver):
    server = receiver(Answer(202))
    created = register(keyed, server.url())
    body = keyed.post(f"/webhooks/{created['id']}/test").json()["data"]
    (received,) = server.received
    payload_ = received.verify(created["secret"])
    assert payload_["type"] == "ping"
    assert payload_["data"] == {"endpoint": created["id"]}
    assert body["eventId"] == received.id == payload_["id"]
    assert (body["statusCode"], body["error"]) == (202, None)
    assert body["durationMs"] >= 0
    deliveries = keyed.get(f"/webhooks/{created['id']}/deliveries").json()["data"]
    assert deliveries[0]["status"] == "delivered"
    assert deliveries[0]["attempts"][0]["statusCode"] == 202


def test_a_dead_endpoint_does_not_delay_the_others(keyed, receiver, settings):
    settings.WEBHOOK_TIMEOUT = 1.5
    slow = receiver(Answer(200, delay=3))
    fast = [receiver() for _ in range(3)]
    register(keyed, slow.url())
    for server in fast:
        register(keyed, server.url())
    announce(6)
    dispatcher = Dispatcher(workers=8, per_endpoint=2)
    try:
        started = time.monotonic()
        dispatcher.drain(until=lambda: Delivery.objects.filter(status="delivered").count() == 18)
        # The fast ones did not wait for the slow one (whose attempt lasts WEBHOOK_TIMEOUT, 1.5 s).
        assert time.monotonic() - started < 1.5
        assert all(len(server.received) == 6 for server in fast)
    finally:
        dispatcher.close()


def test_a_dispatcher_that_dies_mid_attempt_leaves_the_delivery_to_be_sent_again(
    keyed, receiver, monkeypatch
):
    """The claim is a lease: an attempt never recorded (the process died) is sent again when it
    ends; a second dispatcher does not take what the first holds meanwhile."""
    server = receiver()
    register(keyed, server.url())
    (event,) = announce()
    gate = threading.Event()
    dying = Dispatcher(workers=2, per_endpoint=2, send=lambda signed: gate.wait(5) or None)
    outbox_fan_out()
    assert dying.step() == 1  # claimed, sending, never recorded
    other = Dispatcher(workers=2, per_endpoint=2)
    try:
        other.step()
        time.sleep(0.2)
        other.step()
        assert server.received == []
        Delivery.objects.update(next_attempt_at=timezone.now())  # the lease ends
        other.drain()
        assert server.ids() == [event.event_id]
    finally:
        gate.set()
        other.close()


def test_a_dns_answer_turned_private_is_refused_at_delivery(keyed, receiver, monkeypatch, settings):
    """Registered while the name resolved to a public address; by the attempt it resolves to
    loopback, where the receiver listens: nothing is sent, the delivery fails on the rule. (A
    fake resolver: the real DNS cannot be made to change its answer here.)"""
    server = receiver()
    settings.WEBHOOK_ALLOW_PRIVATE_HOSTS = False
    resolver = FakeResolver()
    resolver.answers["hooks.example"] = [["93.184.216.34"]]
    monkeypatch.setattr(socket, "getaddrinfo", resolver)
    register(keyed, f"http://hooks.example:{server.port}/hook")
    resolver.answers["hooks.example"] = [["127.0.0.1"]]
    announce()
    dispatcher = Dispatcher(workers=2, per_endpoint=2)
    try:
        dispatcher.drain()
    finally:
        dispatcher.close()
    assert server.received == []
    delivery = Delivery.objects.get()
    assert delivery.status == "failed"
    assert "not a public address" in delivery.attempts.get().error


def test_a_redirect_is_not_followed(keyed, receiver, dispatcher):
    target = receiver()
    server = receiver(Answer(307, headers={"Location": target.url()}))
    register(keyed, server.url())
    announce()
    dispatcher.drain()
    assert target.received == []
    delivery = Delivery.objects.get()
    assert (delivery.status, delivery.last_status_code) == ("failed", 307)
    assert delivery.attempts.get().error == "redirect not followed"


def test_filters_select_the_events(keyed, receiver, dispatcher, dataset):
    lat, other = dataset.eth_lat, dataset.native_lat
    wallet = "0x" + "ab" * 20
    by_type, by_lat, by_wallet, every = (receiver() for _ in range(4))
    register(keyed, by_type.url(), types=["transfer"])
    register(keyed, by_lat.url(), lats=[other.proxy_address])
    register(keyed, by_wallet.url(), wallets=[wallet.upper().replace("0X", "0x")])
    register(keyed, every.url())
    announce(1, "deposit", ids=["evt_a"], lat=lat, wallets=[wallet])
    announce(1, "transfer", ids=["evt_b"], lat=other)
    dispatcher.drain()
    assert by_type.ids() == ["evt_b"]
    assert by_lat.ids() == ["evt_b"]
    assert by_wallet.ids() == ["evt_a"]
    assert sorted(every.ids()) == ["evt_a", "evt_b"]


def test_an_endpoint_failing_for_days_is_disabled(keyed, receiver, dispatcher, settings):
    settings.WEBHOOK_DISABLE_AFTER = 0.3
    server = receiver(Answer(500))
    register(keyed, server.url())
    announce()
    dispatcher.drain(until=lambda: not Endpoint.objects.get().enabled)
    endpoint = Endpoint.objects.get()
    assert "failed" in endpoint.disabled_reason
    sent = len(server.received)
    announce(1, kind="transfer")
    time.sleep(0.3)
    dispatcher.step()
    time.sleep(0.2)
    dispatcher.step()
    assert len(server.received) == sent


def test_an_endpoint_deleted_during_an_attempt_is_let_go(keyed, receiver):
    server = receiver(Answer(200, delay=0.3))
    created = register(keyed, server.url())
    announce()
    dispatcher = Dispatcher(workers=2, per_endpoint=2)
    try:
        outbox_fan_out()
        assert dispatcher.step() == 1
        assert keyed.delete(f"/webhooks/{created['id']}").status_code == 204
        dispatcher.drain(until=lambda: dispatcher.in_flight == 0)
    finally:
        dispatcher.close()
    assert not Delivery.objects.exists()


def test_a_reorg_withdraws_what_was_sent_and_cancels_the_rest(keyed, receiver, dataset):
    """Orphaned events: one failing on its retries (sent once: withdrawn, its retries
    cancelled), one not attempted yet (cancelled, nothing to withdraw), one below the fork
    (kept)."""
    lat = dataset.eth_lat
    server = receiver(Answer(500))
    register(keyed, server.url())
    retried, kept = announce(2, lat=lat, ids=["evt_retried", "evt_kept"])
    OutboxEvent.objects.filter(id=retried.id).update(block_number=20)
    OutboxEvent.objects.filter(id=kept.id).update(block_number=5)
    dispatcher = Dispatcher(workers=2, per_endpoint=2)
    try:
        dispatcher.drain(until=lambda: len(server.received) == 2)
        dispatcher.drain(until=lambda: dispatcher.in_flight == 0)
        announce(1, lat=lat, ids=["evt_unsent"], block_number=21)
        outbox_fan_out()
        with transaction.atomic():
            # Both withdrawn (a stream may have sent either); the endpoint hears of one.
            assert outbox_events_removing(lat=lat, from_block=10) == 2
        sent = server.ids().count("evt_retried")
        assert sent >= 1
        server.answers = [Answer(200)]
        dispatcher.drain(until=lambda: "evt_removed_" in " ".join(server.ids()))
        time.sleep(0.5)  # the schedule's retries (0.2 s, 0.4 s) would have come by now
        dispatcher.drain()
    finally:
        dispatcher.close()
    statuses = dict(Delivery.objects.values_list("event__event_id", "status"))
    assert statuses["evt_retried"] == statuses["evt_unsent"] == "cancelled"
    ids = server.ids()
    assert ids.count("evt_retried") == sent  # no retry after the reorg
    assert "evt_unsent" not in ids
    (removal,) = [r for r in server.received if r.id.startswith("evt_removed_")]
    assert removal.verify(Endpoint.objects.get().secret)["data"]["removedId"] == "evt_retried"
