"""GET /stream/events against the Procfile's stream process (a live uvicorn on the test
database): rows written to the outbox as the indexer and the refresh write them reach every
stream whose filters match, in id order; a stream resumes after its Last-Event-ID without a gap
or a repeat; the per-address cap, the keep-alive, CORS, Redis stopped, a slow client."""

from __future__ import annotations

import datetime as dt
import socket
import threading
import time

import pytest
from django.db import connection, transaction
from django.utils import timezone
from rest_framework.test import APIClient

from tests.stream.client import Message
from webhooks.models import OutboxEvent
from webhooks.outbox import NOTIFY_CHANNEL, outbox_status_changed

pytestmark = pytest.mark.django_db(transaction=True)

A = "0x" + "a1" * 20
B = "0x" + "b2" * 20


def write(dataset, count: int, *, first_block: int = 1, kind: str = "deposit", **fields):
    """`count` outbox rows (of the ETH LAT unless `lat` is given), one transaction each:
    statusChanged as the refresh writes them, others as rows of the outbox's table."""
    rows = []
    lat = fields.pop("lat", dataset.eth_lat)
    for block in range(first_block, first_block + count):
        with transaction.atomic():
            if kind == "statusChanged":
                rows.append(
                    outbox_status_changed(
                        lat=dataset.eth_lat, paused=True, prices_stale=False, state_block=block
                    )
                )
                continue
            event_id = f"evt_test_{kind}_{block}"
            payload = {"id": event_id, "type": kind, "data": {"blockNumber": block, **fields}}
            rows.append(
                OutboxEvent.objects.create(
                    event_id=event_id,
                    type=kind,
                    lat=lat,
                    block_number=block,
                    wallets=fields.get("wallets", []),
                    payload=payload,
                )
            )
            with connection.cursor() as cursor:  # as the outbox's writers do
                cursor.execute(f"NOTIFY {NOTIFY_CHANNEL}")
    return rows


def ids(messages: list[Message]) -> list[int]:
    return [int(m.id) for m in messages]


def test_live_messages_in_id_order_with_the_payload(connect, dataset):
    stream = connect()
    assert stream.status == 200
    assert stream.response_headers["content-type"].startswith("text/event-stream")
    assert stream.response_headers["cache-control"] == "no-cache"
    time.sleep(0.3)  # subscribed
    rows = write(dataset, 3, kind="statusChanged")
    committed = time.monotonic()
    got = stream.wait(3)
    # The commit's NOTIFY wakes the process: the push freshness promise (2 s), where its poll
    # (every 30 s here) would miss it.
    assert time.monotonic() - committed < 2.0
    assert ids(got) == [row.id for row in rows]
    assert [m.event for m in got] == ["statusChanged"] * 3
    assert [m.data for m in got] == [row.payload for row in rows]


def test_a_resumed_stream_misses_and_repeats_nothing_while_events_keep_coming(connect, dataset):
    first = connect()
    time.sleep(0.3)
    stop = threading.Event()
    written: list[int] = []

    def keep_writing() -> None:
        block = 1
        while not stop.is_set():
            written.extend(row.id for row in write(dataset, 1, first_block=block))
            block += 1
            time.sleep(0.02)
        connection.close()  # this thread's

    writer = threading.Thread(target=keep_writing)
    writer.start()
    try:
        seen = first.wait(5)
        first.close()
        time.sleep(0.3)  # events go on while the client is away
        second = connect(Last_Event_ID=seen[-1].id)
        second.wait(10)
    finally:
        stop.set()
        writer.join()
    total = len(written)
    after = [row for row in written if row > int(seen[-1].id)]
    got = second.wait(len(after))
    assert ids(seen) == written[:5]
    assert ids(got) == after  # every row after the cursor once, in order
    assert total == 5 + len(after)
    # ?cursor= does the same; the header wins over it.
    third = connect(f"cursor={written[1]}")
    assert ids(third.wait(total - 2)) == written[2:]
    fourth = connect(f"cursor={written[0]}", Last_Event_ID=str(written[-2]))
    assert ids(fourth.wait(1)) == written[-1:]


def test_outbox_writers_commit_their_ids_in_order(connect, dataset):
    """A transaction that took outbox ids first commits first: a writer that comes second
    waits for it, so a stream that has sent id N never meets a row below N later."""
    stream = connect()
    time.sleep(0.3)
    committed: dict[str, float] = {}

    def writer(name: str, block: int, hold: float) -> None:
        with transaction.atomic():
            outbox_status_changed(
                lat=dataset.eth_lat, paused=True, prices_stale=False, state_block=block
            )
            time.sleep(hold)
        committed[name] = time.monotonic()
        connection.close()

    slow = threading.Thread(target=writer, args=("slow", 1, 1.0))
    slow.start()
    time.sleep(0.3)  # the slow writer holds its ids
    fast = threading.Thread(target=writer, args=("fast", 2, 0.0))
    fast.start()
    slow.join()
    fast.join()
    assert committed["slow"] < committed["fast"]
    got = stream.wait(2)
    assert [m.data["data"]["stateBlock"] for m in got] == [1, 2]
    assert ids(got) == sorted(ids(got))


def test_filters_select_exactly_the_matching_messages(connect, dataset):
    by_type = connect("types=transfer,statusChanged")
    by_lat = connect(f"lats={dataset.eth_lat.proxy_address.lower()}")
    by_wallet = connect(f"wallets={A.upper().replace('0X', '0x')}")
    time.sleep(0.3)
    deposit_a = write(dataset, 1, first_block=1, wallets=[A])
    transfer_b = write(dataset, 1, first_block=2, kind="transfer", wallets=[B])
    other_lat = write(
        dataset, 1, first_block=3, kind="transfer", wallets=[A], lat=dataset.native_lat
    )
    status = write(dataset, 1, first_block=4, kind="statusChanged")
    assert ids(by_type.wait(3)) == [r.id for r in (*transfer_b, *other_lat, *status)]
    assert ids(by_lat.wait(3)) == [r.id for r in (*deposit_a, *transfer_b, *status)]
    assert ids(by_wallet.wait(2)) == [r.id for r in (*deposit_a, *other_lat)]
    time.sleep(1.5)  # nothing else comes
    assert (len(by_type.messages), len(by_lat.messages), len(by_wallet.messages)) == (3, 3, 2)


def test_every_idle_stream_gets_keep_alive_comments_again_and_again(connect):
    """One timer of the process keeps every stream alive (stream/hub.py; its interval is
    test_hub.py's): each of three idle streams, opened at different moments, gets one comment
    after another (one a second here)."""
    streams = []
    for _ in range(3):
        streams.append(connect())
        time.sleep(0.35)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if all(s.comments.count("keep-alive") >= 3 for s in streams):
            break
        time.sleep(0.05)
    assert [min(s.comments.count("keep-alive"), 3) for s in streams] == [3, 3, 3]
    assert not any(s.messages or s.closed for s in streams)


def test_at_most_the_cap_of_open_streams_per_client_address(connect):
    streams = [connect() for _ in range(3)]
    assert [s.status for s in streams] == [200] * 3
    refused = connect()
    assert refused.status == 429
    assert refused.body["error"]["code"] == "rate_limit_exceeded"
    assert int(refused.response_headers["retry-after"]) > 0
    streams[0].close()
    deadline = time.monotonic() + 5
    while (again := connect()).status != 200 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert again.status == 200  # a closed stream gives its slot back


def test_bad_parameters_are_a_422_in_the_error_body(connect):
    for query in ("types=deposit,nope", "lats=0x12", "wallets=abc", "cursor=-1", "cursor=x"):
        refused = connect(query)
        assert (refused.status, refused.body["error"]["code"]) == (422, "unprocessable_entity")
    assert connect(Last_Event_ID="abc").status == 422


def test_api_keys_as_for_the_api(connect, db):
    from rest_framework_api_key.models import APIKey

    refused = connect(X_API_Token="not-a-key")
    assert (refused.status, refused.body["error"]["code"]) == (401, "unauthorized")
    _, key = APIKey.objects.create_key(name="stream tests")
    keyed = connect(X_API_Token=key)
    assert keyed.status == 200
    assert int(keyed.response_headers["ratelimit-limit"]) > 0  # counted as any request


def _until_closed(streams, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not all(stream.closed for stream in streams):
        time.sleep(0.05)


def _still_open(streams) -> None:
    """Each of `streams` open and written to (its keep-alive, every second) for 2.5 s more."""
    before = [len(stream.comments) for stream in streams]
    time.sleep(2.5)
    for stream, count in zip(streams, before, strict=True):
        assert not stream.closed
        assert len(stream.comments) > count


def test_a_stream_ends_when_its_key_is_disabled_or_deleted(connect, db):
    """STREAM_KEY_CHECK_SECONDS is 1 here: the streams of a key disabled (revoked, as staff do in
    admin) or deleted end within a second or two; another key's stream goes on; reconnecting
    with the disabled key is refused as any request with it is."""
    from rest_framework_api_key.models import APIKey

    (disabled, disabled_key), (deleted, deleted_key), (_, kept_key) = (
        APIKey.objects.create_key(name=f"stream {name}") for name in ("disabled", "deleted", "kept")
    )
    streams = [connect(X_API_Token=key) for key in (disabled_key, deleted_key, kept_key)]
    assert [stream.status for stream in streams] == [200, 200, 200]
    APIKey.objects.filter(pk=disabled.pk).update(revoked=True)
    deleted.delete()
    _until_closed(streams[:2], timeout=5)
    assert [stream.closed for stream in streams] == [True, True, False]
    _still_open(streams[2:])
    refused = connect(X_API_Token=disabled_key)
    assert (refused.status, refused.body["error"]["code"]) == (403, "forbidden")
    assert "disabled" in refused.body["error"]["message"]


def test_a_stream_ends_when_its_key_expires(connect, db):
    """An expiry that passes while the stream is open ends it too; a stream without a key is
    never checked."""
    from rest_framework_api_key.models import APIKey

    soon = timezone.now() + dt.timedelta(seconds=2)
    _, key = APIKey.objects.create_key(name="stream expiring", expiry_date=soon)
    keyed, anonymous = connect(X_API_Token=key), connect()
    assert (keyed.status, anonymous.status) == (200, 200)
    _until_closed([keyed], timeout=2 + 5)
    assert keyed.closed
    assert timezone.now() >= soon
    _still_open([anonymous])


def test_cors_as_for_the_api(connect):
    stream = connect(Origin="https://dashboard.example")
    assert stream.status == 200
    assert stream.response_headers["access-control-allow-origin"] == "*"


def test_the_web_process_does_not_hold_streams(db):
    for accept in ("text/event-stream", "application/json", "*/*", "text/html", None):
        headers = {"HTTP_ACCEPT": accept} if accept else {}
        response = APIClient().get("/stream/events", **headers)
        assert response.status_code == 404, accept
        assert response["Content-Type"] == "application/json"
        assert "stream process" in response.json()["error"]["message"]


def test_whatever_the_client_accepts_the_stream_opens_and_refusals_are_json(connect):
    """EventSource sends `Accept: text/event-stream` (every client here does, as browsers);
    other clients send anything or nothing. A refusal is the JSON error body for each."""
    for accept in ("text/event-stream", "text/event-stream, */*", "*/*", "text/html", ""):
        stream = connect(Accept=accept)
        assert stream.status == 200, (accept, stream.body)
        assert stream.response_headers["content-type"].startswith("text/event-stream")
        stream.close()
        refused = connect("types=nope", Accept=accept)
        assert refused.status == 422, accept
        assert refused.response_headers["content-type"] == "application/json"
        assert refused.body["error"]["code"] == "unprocessable_entity"


def test_with_redis_stopped_mid_stream_the_stream_goes_on(connect, dataset, redis_server):
    stream = connect()
    time.sleep(0.3)
    first = write(dataset, 1)
    stream.wait(1)
    redis_server.stop()
    second = write(dataset, 2, first_block=2)
    assert ids(stream.wait(3)) == [r.id for r in (*first, *second)]
    late = connect("cursor=0")  # connects too: the cap is counted in the process meanwhile
    assert late.status == 200
    assert ids(late.wait(3))[-3:] == [r.id for r in (*first, *second)]


def test_a_burst_larger_than_a_stream_queue_arrives_whole_and_in_order(connect, dataset):
    """20 messages may be queued per stream; a burst of 150 in one commit is caught up from
    the stored feed."""
    stream = connect()
    time.sleep(0.3)
    with transaction.atomic():
        rows = write(dataset, 150)
    assert ids(stream.wait(150)) == [row.id for row in rows]


def test_a_client_reading_too_slowly_is_dropped(stream_process, connect, dataset):
    """A client that leaves a message unread for STREAM_SEND_TIMEOUT (2 s) is disconnected."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", stream_process.port))
    sock.sendall(b"GET /stream/events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    time.sleep(0.5)
    write(dataset, 200, big="x" * 20_000)  # ~4 MB: more than every buffer on the way
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if any("reading too slowly" in line for line in stream_process.log):
            break
        time.sleep(0.1)
    assert any("reading too slowly" in line for line in stream_process.log)
    sock.settimeout(10)
    received = 0
    while chunk := sock.recv(65536):  # what was buffered, then the end: the server closed it
        received += len(chunk)
    assert received < 4_000_000
    sock.close()
    assert connect().status == 200  # its slot is free again
