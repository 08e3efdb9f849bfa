"""The dispatcher process killed mid-way and started again loses nothing and duplicates nothing
beyond at-least-once.

The Procfile's `webhooks` line runs as a subprocess against the test database, with five
endpoints (four answering at once, one slow, so that its sends are in flight) and events written
by the state refresh's outbox writer in batches, before and while it runs (and while it is
down). Mid-way it gets SIGKILL: no shutdown, sends cut off. What it held at that moment (its
claimed deliveries, leased: pending and due only later) is read from the database; then it is
started again. Every (endpoint, event id) must be received at least once, and an id twice only
where its delivery was held at the kill: at most WEBHOOK_PER_ENDPOINT per endpoint.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.db import transaction
from django.utils import timezone

from tests.processes import database_url, terminate
from tests.webhooks.conftest import register
from tests.webhooks.receivers import Answer
from webhooks.models import Delivery
from webhooks.outbox import outbox_status_changed

pytestmark = pytest.mark.django_db(transaction=True)

REPO = Path(__file__).resolve().parents[2]
WORKERS, PER_ENDPOINT = 8, 2
LEASE = 4.0  # seconds (WEBHOOK_LEASE_SECONDS): a held delivery is sent again after it
ENDPOINTS, EVENTS, BATCH = 5, 100, 10
SLOW = 0.25  # seconds the slow receiver takes to answer
KILL_AT = 0.4  # of all the deliveries received


class Dispatch:
    """The Procfile's `webhooks` line as a subprocess of its own session."""

    def __init__(self, env: dict[str, str], log: Path) -> None:
        line = next(
            line.split(":", 1)[1]
            for line in (REPO / "Procfile").read_text().splitlines()
            if line.startswith("webhooks:")
        )
        self.command = shlex.split(line)
        assert self.command[0] == "python"
        self.command[0] = sys.executable
        self.env, self.log = env, log
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                self.command,
                cwd=REPO,
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def kill(self) -> None:
        assert self.process is not None
        assert self.process.poll() is None, self.tail()
        self.process.kill()  # SIGKILL: no shutdown, sends cut off
        self.process.wait(10)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            terminate(self.process, 20)  # SIGTERM finishes the sends in flight

    def tail(self) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-30:])


@pytest.fixture
def dispatch(receiver, tmp_path) -> Iterator[Dispatch]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WEBHOOK_")}
    env |= {
        "DATABASE_URL": database_url(),
        "DB_CONN_MAX_AGE": "0",
        "PYTHONUNBUFFERED": "1",
        "WEBHOOK_ALLOW_HTTP": "true",
        "WEBHOOK_ALLOW_PRIVATE_HOSTS": "true",
        "WEBHOOK_WORKERS": str(WORKERS),
        "WEBHOOK_PER_ENDPOINT": str(PER_ENDPOINT),
        "WEBHOOK_TIMEOUT": "2",
        "WEBHOOK_LEASE_SECONDS": str(LEASE),
    }
    process = Dispatch(env, tmp_path / "dispatch.log")
    yield process
    process.stop()


def write_events(lat, first: int, count: int) -> list[str]:
    """`count` statusChanged events of the LAT (state blocks first, first + 1, ...), each
    committed on its own as a state refresh commits it: their ids."""
    ids = []
    for block in range(first, first + count):
        with transaction.atomic():
            event = outbox_status_changed(
                lat=lat, paused=block % 2 == 0, prices_stale=False, state_block=block
            )
        ids.append(event.event_id)
    return ids


def test_a_dispatcher_killed_mid_way_and_restarted_loses_and_duplicates_nothing_more(
    keyed, receiver, dispatch, dataset, settings
):
    servers = [receiver(Answer(delay=0.02)) for _ in range(ENDPOINTS - 1)]
    servers.append(receiver(Answer(delay=SLOW)))
    dispatch.env["WEBHOOK_ALLOWED_PORTS"] = ",".join(str(s.port) for s in servers)
    urls = {register(keyed, server.url())["url"]: server for server in servers}
    lat = dataset.eth_lat

    ids = write_events(lat, 1, EVENTS // 2)
    dispatch.start()
    total = ENDPOINTS * EVENTS
    deadline = time.monotonic() + 60
    while sum(len(s.received) for s in servers) < KILL_AT * total:
        assert time.monotonic() < deadline, dispatch.tail()
        if len(ids) < EVENTS * 3 // 4:  # more events arrive while it sends
            ids += write_events(lat, len(ids) + 1, BATCH)
        time.sleep(0.05)
    dispatch.kill()
    killed_at = timezone.now()
    held = {
        (url, event_id)
        for url, event_id in Delivery.objects.filter(
            status=Delivery.Status.PENDING, next_attempt_at__gt=killed_at
        ).values_list("endpoint__url", "event__event_id")
    }
    time.sleep(0.5)  # a request written before the kill is read by its receiver by now
    before = {url: Counter(server.ids()) for url, server in urls.items()}
    assert 0 < sum(map(len, before.values())) < total  # killed mid-way
    assert held, "nothing was in flight at the kill"
    ids += write_events(lat, len(ids) + 1, EVENTS - len(ids))  # while it is down

    dispatch.start()
    deadline = time.monotonic() + 90
    while Delivery.objects.exclude(status=Delivery.Status.DELIVERED).exists() or (
        Delivery.objects.count() < total
    ):
        assert time.monotonic() < deadline, dispatch.tail()
        assert dispatch.process.poll() is None, dispatch.tail()
        time.sleep(0.1)
    dispatch.stop()

    assert len(set(ids)) == EVENTS
    duplicated = set()
    for url, server in urls.items():
        counts = Counter(server.ids())
        assert set(counts) == set(ids), url  # every event, at least once
        for event_id, n in counts.items():
            assert n <= 2, (url, event_id, n)
            if n == 2:
                duplicated.add((url, event_id))
                assert before[url][event_id] == 1  # once before the kill, once after
    # Twice only what was held at the kill, at most PER_ENDPOINT per endpoint.
    assert duplicated <= held
    assert len(held) <= ENDPOINTS * PER_ENDPOINT
    assert all(n <= PER_ENDPOINT for n in Counter(url for url, _ in held).values())
    print(f"held at the kill: {len(held)}, received twice: {len(duplicated)}")
