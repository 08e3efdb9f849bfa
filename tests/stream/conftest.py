from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from tests.processes import database_url
from tests.stream.client import Client, StreamProcess


@pytest.fixture(scope="module")
def stream_process(django_db_setup, redis_server) -> Iterator[StreamProcess]:
    """The Procfile's stream process on the test database and the module's own Redis, with a
    keep-alive every second, 3 streams per client address, 20 messages queued per stream
    (a larger burst is caught up from the stored feed), 2 s for a client to read a message, and
    a poll every 30 s (the NOTIFY of a commit must wake it)."""
    process = StreamProcess(
        {
            "DATABASE_URL": database_url(),
            "REDIS_URL": redis_server.url(),
            "STREAM_KEEPALIVE_SECONDS": "1",
            "STREAM_MAX_PER_IP": "3",
            "REDIS_RETRY_AFTER": "1",
            "STREAM_BUFFER": "20",
            "STREAM_SEND_TIMEOUT": "2",
            "STREAM_POLL_SECONDS": "30",  # only the outbox's NOTIFY wakes it in time
            "STREAM_KEY_CHECK_SECONDS": "1",
        }
    )
    yield process
    process.stop()


@pytest.fixture
def connect(stream_process, redis_server) -> Iterator[Callable[..., Client]]:
    """connect(query="", **headers): a stream of the process, closed after the test."""
    opened: list[Client] = []
    if redis_server.process is None or redis_server.process.poll() is not None:
        redis_server.start()
    redis_server.client().flushall()  # no slot of an earlier test's streams

    def open_stream(query: str = "", **headers: str) -> Client:
        path = "/stream/events" + (f"?{query}" if query else "")
        client = Client(
            stream_process.port, path, {k.replace("_", "-"): v for k, v in headers.items()}
        )
        opened.append(client)
        return client

    yield open_stream
    for client in opened:
        client.close()
