"""A client that disconnects while its stream's connect is being granted: the grant is never
taken, and the slot it holds is given back, so that the per-address cap still admits new
streams. The connects are slowed for real: the Redis that the rate limit and the slots use is
paused (SIGSTOP) while the clients send their request and close their socket."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterator

import pytest

from tests.stream.client import EVENTSOURCE_HEADERS, Client, StreamProcess
from tests.stream.conftest import database_url

pytestmark = pytest.mark.django_db(transaction=True)

CAP = 3
GRANT_SECONDS = 1
REDIS_TIMEOUT = 2  # seconds a call waits on the paused Redis (resumed before that)


@pytest.fixture(scope="module")
def stream_process(django_db_setup, redis_server) -> Iterator[StreamProcess]:
    """The Procfile's stream process with 3 streams per client address, grants that lapse
    after a second, Redis calls that give up after 2 s, and Redis left alone for a second
    after a failure."""
    process = StreamProcess(
        {
            "DATABASE_URL": database_url(),
            "REDIS_URL": redis_server.url(),
            "STREAM_MAX_PER_IP": str(CAP),
            "STREAM_GRANT_SECONDS": str(GRANT_SECONDS),
            "STREAM_KEEPALIVE_SECONDS": "1",
            "REDIS_RETRY_AFTER": "1",
            "REDIS_SOCKET_TIMEOUT": str(REDIS_TIMEOUT),
        }
    )
    yield process
    process.stop()


def send_connect(port: int) -> socket.socket:
    """A connect's request sent; the caller closes the socket without reading the answer."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    head = "".join(f"{k}: {v}\r\n" for k, v in EVENTSOURCE_HEADERS.items())
    sock.sendall(f"GET /stream/events HTTP/1.1\r\nHost: 127.0.0.1\r\n{head}\r\n".encode())
    return sock


def open_slots(redis_server) -> int:
    """The stream slots counted in Redis, every address's."""
    client = redis_server.client()
    return sum(client.zcard(key) for key in client.scan_iter("*stream:open:*"))


def test_connects_cut_mid_grant_leave_no_slot_and_no_grant(
    connect: Callable[..., Client], stream_process, redis_server
):
    connect().close()  # the process has read the feed once: a connect reaches its view at once
    log_lines = len(stream_process.log)
    redis_server.pause()
    try:
        socks = [send_connect(stream_process.port) for _ in range(CAP)]
        time.sleep(0.5)  # the connects are in the view, waiting on Redis
        for sock in socks:
            sock.close()  # cut before the answer
        time.sleep(0.5)
    finally:
        redis_server.resume()
    time.sleep(GRANT_SECONDS + 0.5)  # the cut connects' grants have lapsed
    streams = [connect() for _ in range(CAP)]
    assert [s.status for s in streams] == [200] * CAP
    assert connect().status == 429  # the cap still holds
    released = [
        line
        for line in stream_process.log[log_lines:]
        if "a stream connect ended before its stream started" in line
    ]
    assert len(released) == CAP, stream_process.log[log_lines:]
    assert open_slots(redis_server) == CAP  # counted in Redis: the open streams only
    for stream in streams:
        stream.close()
