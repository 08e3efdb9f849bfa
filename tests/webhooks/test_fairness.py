"""Fairness of the dispatcher (extensions.md, "Webhooks", fairness): endpoints that never answer
beside answering ones, two dispatchers over one database (no delivery sent twice at once, the
per-endpoint cap held by both together), connections kept alive to the checked address, and a
resolver that hangs. Receivers are real TCP servers on loopback."""

from __future__ import annotations

import http.server
import selectors
import socket
import threading
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone
from rest_framework_api_key.models import APIKey

from tests.resolver import FakeResolver
from tests.webhooks.test_delivery import announce
from webhooks.dispatcher import Dispatcher
from webhooks.models import Attempt, Delivery, Endpoint
from webhooks.sending import ConnectionPools, Signed, attempt_send
from webhooks.services import Candidate, claim_fair
from webhooks.signing import secret_new


class Silent:
    """TCP servers on loopback that accept every connection and never answer a byte."""

    def __init__(self, count: int) -> None:
        self._selector = selectors.DefaultSelector()
        self._stop = threading.Event()
        self.accepted: list[socket.socket] = []
        self.ports: list[int] = []
        for _ in range(count):
            server = socket.create_server(("127.0.0.1", 0), backlog=64)
            server.setblocking(False)
            self._selector.register(server, selectors.EVENT_READ)
            self.ports.append(server.getsockname()[1])
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            for key, _ in self._selector.select(0.05):
                try:
                    client, _ = key.fileobj.accept()  # type: ignore[union-attr]
                except BlockingIOError:
                    continue
                self.accepted.append(client)  # held open, never read nor answered

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
        for key in list(self._selector.get_map().values()):
            key.fileobj.close()  # type: ignore[union-attr]
        for client in self.accepted:
            client.close()


class Counting:
    """An HTTP/1.1 receiver (keep-alive) that answers 200 after `delay` seconds and counts the
    requests in progress at once, per message id and in all, and the connections it accepted
    (with the address each was made to)."""

    def __init__(self, *, delay: float = 0.0, host: str = "127.0.0.1") -> None:
        self.lock = threading.Lock()
        self.active: Counter[str] = Counter()
        self.most: Counter[str] = Counter()  # message id -> most requests at once
        self.most_total = 0
        self.received: list[str] = []
        self.connections: list[str] = []  # the local address of each connection accepted
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()
                with receiver.lock:
                    receiver.connections.append(self.connection.getsockname()[0])

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                message = self.headers["webhook-id"]
                with receiver.lock:
                    receiver.active[message] += 1
                    receiver.active["*"] += 1
                    receiver.most[message] = max(receiver.most[message], receiver.active[message])
                    receiver.most_total = max(receiver.most_total, receiver.active["*"])
                    receiver.received.append(message)
                threading.Event().wait(delay)
                with receiver.lock:
                    receiver.active[message] -= 1
                    receiver.active["*"] -= 1
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer((host, 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_port
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _endpoint(key: APIKey, port: int) -> Endpoint:
    """Made directly: a registration asks the URL first (up to 3 s for a silent one)."""
    return Endpoint.objects.create(
        public_id=f"wh_test_{port}",
        api_key=key,
        url=f"http://127.0.0.1:{port}/hook",
        secret=secret_new(),
    )


@pytest.fixture
def silent(settings) -> Iterator[Silent]:
    servers = Silent(100)
    settings.WEBHOOK_ALLOWED_PORTS = [*settings.WEBHOOK_ALLOWED_PORTS, *servers.ports]
    yield servers
    servers.stop()


@pytest.mark.django_db
def test_endpoints_that_never_answer_do_not_delay_the_others(receiver, silent, settings):
    """100 endpoints that accept and never answer (five keys of 20) beside 5 that answer (a key
    of their own), 3 events each, the dispatcher's defaults: every delivery to the 5 is made
    while the 100's first attempts are all still hanging (none has ended: no attempt of theirs
    is recorded), and no endpoint ever has more attempts under way than WEBHOOK_PER_ENDPOINT."""
    settings.WEBHOOK_TIMEOUT = 60.0  # the silent ones' attempts outlast the test
    keys = [APIKey.objects.create_key(name=f"silent {k}")[0] for k in range(5)]
    dead = [_endpoint(keys[i // 20], port) for i, port in enumerate(silent.ports)]
    answering_key = APIKey.objects.create_key(name="answering")[0]
    servers = [receiver() for _ in range(5)]
    live = [_endpoint(answering_key, server.port) for server in servers]
    events = announce(3)
    dispatcher = Dispatcher()
    most_leased = 0

    def all_delivered() -> bool:
        nonlocal most_leased
        leased = Counter(
            Delivery.objects.filter(leased_until__isnull=False).values_list(
                "endpoint_id", flat=True
            )
        )
        most_leased = max([most_leased, *leased.values()])
        return Delivery.objects.filter(endpoint__in=live, status="delivered").count() == 15

    try:
        dispatcher.drain(timeout=30, until=all_delivered)
        assert dispatcher.in_flight <= settings.WEBHOOK_WORKERS
        # The silent ones hold senders (their first attempts hang), but none has ended.
        assert not Attempt.objects.filter(delivery__endpoint__in=dead).exists()
        assert Delivery.objects.filter(endpoint__in=dead, leased_until__isnull=False).exists()
    finally:
        settings.WEBHOOK_TIMEOUT = 0.5
        silent.stop()  # the hanging attempts end now
        dispatcher.close()
    for server in servers:
        assert sorted(server.ids()) == sorted(e.event_id for e in events)
    assert 0 < most_leased <= settings.WEBHOOK_PER_ENDPOINT


@pytest.mark.django_db(transaction=True)
def test_two_dispatchers_never_send_a_delivery_twice_at_once_and_share_the_cap(settings, receiver):
    """Two dispatchers over one database, each with more senders than the endpoints may take:
    while the first holds every endpoint's WEBHOOK_PER_ENDPOINT, the second claims nothing;
    then both run: every delivery is sent once, never two at once, and each endpoint has at
    most WEBHOOK_PER_ENDPOINT requests under way at once, by both dispatchers together."""
    receiver()  # the settings of loopback receivers
    per_endpoint = 2
    servers = [Counting(delay=0.1) for _ in range(3)]
    settings.WEBHOOK_ALLOWED_PORTS = [s.port for s in servers]
    key = APIKey.objects.create_key(name="two dispatchers")[0]
    for server in servers:
        _endpoint(key, server.port)
    events = announce(12)
    gate = threading.Event()
    sent: Counter[str] = Counter()

    def sender(name: str):
        def send(signed: Signed):
            gate.wait(10)
            sent[name] += 1
            return attempt_send(signed)

        return send

    # Every sender may go to endpoints not heard from yet: the cap per endpoint is measured.
    shares = {"workers": 8, "per_endpoint": per_endpoint, "failing_workers": 8}
    first = Dispatcher(**shares, send=sender("first"))
    second = Dispatcher(**shares, send=sender("second"))
    errors: list[BaseException] = []

    def drain(dispatcher: Dispatcher) -> None:
        try:
            dispatcher.drain(
                timeout=60,
                until=lambda: (
                    Delivery.objects.filter(status="delivered").count() == 36
                    and dispatcher.in_flight == 0
                ),
            )
        except BaseException as exc:  # reported by the test
            errors.append(exc)
        finally:
            connection.close()

    try:
        first.step()
        assert first.in_flight == 3 * per_endpoint  # every endpoint's share, held
        second.step()
        assert second.in_flight == 0
        gate.set()
        threads = [threading.Thread(target=drain, args=(d,)) for d in (first, second)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(90)
    finally:
        gate.set()
        first.close()
        second.close()
        for server in servers:
            server.stop()
    assert errors == []
    for server in servers:
        assert sorted(server.received) == sorted(e.event_id for e in events)  # each once
        assert max(server.most.values()) == 1  # never two at once
        assert server.most_total <= per_endpoint
    assert sent["first"] + sent["second"] == 36


def test_connections_are_kept_alive_to_the_checked_address(settings, monkeypatch):
    """Ten attempts on one connection; once the host resolves to another address, the next
    attempt connects to that one (checked as before), never the kept connection."""
    settings.WEBHOOK_ALLOW_HTTP = True
    settings.WEBHOOK_ALLOW_PRIVATE_HOSTS = True
    settings.WEBHOOK_TIMEOUT = 5.0
    server = Counting(host="0.0.0.0")
    settings.WEBHOOK_ALLOWED_PORTS = [server.port]
    resolver = FakeResolver()
    resolver.answers["hooks.example"] = [["127.0.0.1"]]
    monkeypatch.setattr(socket, "getaddrinfo", resolver)
    pools = ConnectionPools()
    url = f"http://hooks.example:{server.port}/hook"
    try:
        for i in range(10):
            signed = Signed(url, f"evt_keep_{i}", b"{}", (secret_new(),))
            assert attempt_send(signed, pools=pools).status_code == 200
        resolver.answers["hooks.example"] = [["127.0.0.2"]]
        signed = Signed(url, "evt_moved", b"{}", (secret_new(),))
        assert attempt_send(signed, pools=pools).status_code == 200
        # Nagle's algorithm off on the kept connection: http.client sends a request's head and
        # body apart, and with it on the body would wait for the head's ACK, which the
        # receiver's kernel delays by 40 ms (every attempt took 41 ms and more on loopback).
        kept = [connection for idle in pools._idle.values() for _, connection in idle]
        assert len(kept) == 2  # one per address
        assert all(c._socket.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) for c in kept)
    finally:
        pools.close()
        server.stop()
    assert len(server.received) == 11
    assert server.connections == ["127.0.0.1", "127.0.0.2"]


def test_a_resolver_that_hangs_fails_the_attempt_at_its_deadline(settings, monkeypatch):
    """The name is resolved within the attempt's deadline: a resolver that has not answered by
    WEBHOOK_TIMEOUT fails the attempt (a timeout, tried again), while it still hangs."""
    settings.WEBHOOK_ALLOW_HTTP = True
    settings.WEBHOOK_TIMEOUT = 0.3
    release = threading.Event()
    real = socket.getaddrinfo

    def hanging(host, port, *args, **kwargs):
        if host == "slow.example":
            release.wait(30)
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", hanging)
    try:
        result = attempt_send(Signed("http://slow.example/hook", "evt_slow", b"{}", ("k",)))
        still_hanging = not release.is_set()
    finally:
        release.set()
    assert still_hanging
    assert result.status_code is None
    assert result.error == "no answer within 0.3 s"
    assert result.retryable


def _candidates(rows: list[tuple[str, int, bool, int]]) -> list[Candidate]:
    """(key, endpoint, failing, leased) per due delivery, oldest first; ids in that order."""
    return [Candidate(i, e, k, f, n) for i, (k, e, f, n) in enumerate(rows, 1)]


def test_the_claim_shares_senders_across_keys_then_endpoints():
    # Key A: endpoint 1 with five due, endpoint 2 with one; key B: endpoint 3 with two.
    rows = [("A", 1, False, 0)] * 5 + [("A", 2, False, 0)] + [("B", 3, False, 0)] * 2
    candidates = _candidates(rows)
    taken = claim_fair(candidates, free=4, failing_free=4, key_load={})
    # Turns: A (endpoint 1), B, A (endpoint 2, its first turn), B.
    assert [c.delivery_id for c in taken] == [1, 7, 6, 8]
    # Key B has three sends in flight already: A takes the free senders until it has as many.
    taken = claim_fair(candidates, free=4, failing_free=4, key_load={"B": 3})
    assert [c.delivery_id for c in taken] == [1, 6, 2, 3]


def test_a_new_endpoint_of_a_busy_key_gets_its_first_attempts_at_once():
    """Key A's endpoint 1 answers and has a backlog; its endpoint 2 is new (not heard from
    yet: with the failing ones). Within the failing share, A's turns go to its least loaded
    endpoint: 2 is not held back until 1's backlog is sent (it was: a key with an answering
    endpoint always took that one, and a burst's new endpoints waited for the end of it)."""
    rows = [("A", 1, False, 0)] * 5 + [("A", 2, True, 0)] * 3
    taken = claim_fair(_candidates(rows), free=4, failing_free=4, key_load={})
    assert [c.delivery_id for c in taken] == [1, 6, 2, 7]
    taken = claim_fair(_candidates(rows), free=4, failing_free=1, key_load={})
    assert [c.delivery_id for c in taken] == [1, 6, 2, 3]


def test_failing_endpoints_hold_no_more_than_their_share():
    rows = [("A", e, True, 0) for e in range(1, 11)] + [("B", 20, False, 0)] * 6
    taken = claim_fair(_candidates(rows), free=8, failing_free=2, key_load={})
    failing = [c for c in taken if c.failing]
    assert len(failing) == 2
    assert len(taken) == 8  # the others take the rest
    # An endpoint already at its share (leased by any dispatcher) waits behind the others.
    rows = [("A", 1, False, 3), ("A", 1, False, 3), ("A", 2, False, 0)]
    taken = claim_fair(_candidates(rows), free=2, failing_free=2, key_load={})
    assert [c.delivery_id for c in taken] == [3, 1]


def test_one_keys_dead_endpoints_do_not_keep_another_keys_new_ones_from_their_first_attempt():
    """Key D's endpoints never answered (two of its attempts hang); key F has a new endpoint
    (2) not heard from yet beside one that answers (1), and more sends in flight than D. The one
    sender left for such endpoints goes to F's new endpoint, whose key has none of them in
    flight, not to D's next dead one."""
    rows = [("D", 7, True, 1), ("D", 8, True, 1), ("F", 1, False, 0), ("F", 2, True, 0)]
    taken = claim_fair(
        _candidates(rows),
        free=3,
        failing_free=1,
        key_load={"D": 2, "F": 3},
        restricted_load={"D": 2},
    )
    assert [(c.key_id, c.endpoint_id) for c in taken] == [("F", 2), ("F", 1)]


@pytest.mark.django_db
def test_the_claim_reads_the_same_through_the_orm_as_through_postgresql():
    """The demo's dispatcher runs on SQLite, where the claim's candidates and lease go through
    the ORM: the same rows as PostgreSQL's statements, here on PostgreSQL."""
    from datetime import timedelta

    from django.utils import timezone

    from webhooks import services

    key, _ = APIKey.objects.create_key(name="orm")
    endpoints = [_endpoint(key, 40_000 + i) for i in range(3)]
    endpoints[1].failing_since = timezone.now()
    endpoints[1].save()
    now = timezone.now()
    for i, event in enumerate(announce(9)):
        Delivery.objects.create(
            endpoint=endpoints[i % 3],
            event=event,
            next_attempt_at=now - timedelta(seconds=100 - i),
            leased_until=now + timedelta(seconds=60) if i == 0 else None,
        )
    with connection.cursor() as cursor:
        cursor.execute(services._CANDIDATES, {"now": now, "per": 2})
        expected = [tuple(row) for row in cursor.fetchall()]
    assert services.candidate_rows(now=now, per_endpoint=2) == expected
    # endpoint 0 holds one lease: one more of its deliveries; the others two each
    assert Counter(row[0] for row in expected) == {
        e.id: 1 if e == endpoints[0] else 2 for e in endpoints
    }

    ids = [row[4] for row in expected]
    lease = now + timedelta(seconds=120)
    portable = services._claim_rows(ids, lease=lease, now=now)
    assert set(portable) == set(ids)
    for delivery in Delivery.objects.filter(id__in=ids).select_related("event", "endpoint"):
        _, event_id, payload, url, *_ = portable[delivery.id]
        assert (event_id, url) == (delivery.event.event_id, delivery.endpoint.url)
        assert services._body(payload) == services._body(delivery.event.payload)
        assert delivery.leased_until == lease
    assert services._claim_rows(ids, lease=lease, now=now) == {}  # leased: not due any more


@pytest.mark.django_db(transaction=True)
def test_a_dispatcher_frozen_after_its_claim_sends_nothing_once_the_claim_lapsed(
    receiver, settings
):
    """Dispatcher A claims a delivery and stops before sending it (its sender frozen, as
    SIGSTOP would stop it); its lease passes, dispatcher B claims the delivery again and sends
    it; A wakes and neither sends nor records it: the receiver gets it once, as B recorded it."""
    settings.WEBHOOK_TIMEOUT = 0.5
    settings.WEBHOOK_LEASE_SECONDS = 2.0
    server = receiver()
    key, _ = APIKey.objects.create_key(name="frozen")
    endpoint = Endpoint.objects.create(
        public_id="wh_frozen", api_key=key, url=server.url(), secret=secret_new()
    )
    (event,) = announce(1)
    delivery = Delivery.objects.create(
        endpoint=endpoint, event=event, next_attempt_at=timezone.now()
    )

    first, second = Dispatcher(workers=2), Dispatcher(workers=2)
    frozen: list[Any] = []
    first._pool.submit = lambda fn, *args: frozen.append((fn, args))  # type: ignore[method-assign]
    try:
        assert first._claim_and_send() == 1  # claimed, its send held back
        time.sleep(2.1)  # the lease passes
        second.drain(timeout=10, until=lambda: Attempt.objects.filter(delivery=delivery).exists())
        assert server.ids() == [event.event_id]
        delivery.refresh_from_db()
        assert delivery.status == Delivery.Status.DELIVERED
        ((fn, args),) = frozen
        fn(*args)  # A wakes: its sender runs the held-back job
        first.step(fan_out=False)
        assert server.ids() == [event.event_id]  # not sent again
        assert Attempt.objects.filter(delivery=delivery).count() == 1  # nor recorded
        delivery.refresh_from_db()
        assert delivery.status == Delivery.Status.DELIVERED
    finally:
        first.close()
        second.close()
