"""A real Celery worker and a real beat, as subprocesses, against the test database.

Beat reads the schedules from django-celery-beat's tables (DatabaseScheduler) and publishes to a
Redis broker on a Redis database of its own; the worker runs the refresh tasks against the anvil
devnet. The test plays ops: it switches jobs on and off and re-times them in the database, as
admin does, and the running beat follows without a restart.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest
import redis
from django.conf import settings
from django.core.management import call_command
from django_celery_beat.models import IntervalSchedule, PeriodicTask

from deposits.models import Deposit
from devchain.devnet import write_manifests
from lats.models import Lat, SyncStatus
from sync.schedules import DEFAULT_SCHEDULES, ensure_default_schedules
from tests.chainreads import chain_deposit_count
from tests.processes import database_url

pytestmark = [pytest.mark.chain, pytest.mark.xdist_group("celery")]

ROOT = Path(__file__).resolve().parents[2]
DEADLINE = 90  # seconds for a scheduled run to land, start-up included, on a busy machine


def broker_url(worker_id: str) -> str:
    """The test Redis, on a database of its own per test worker (the cache uses another)."""
    base = os.environ.get("TEST_REDIS_URL") or settings.REDIS_URL or "redis://127.0.0.1:6379/15"
    index = int(worker_id[2:]) if worker_id.startswith("gw") else 0
    return urlunsplit(urlsplit(base)._replace(path=f"/{14 - index}"))


class Processes:
    """Celery subprocesses, each in a session of its own; stop() ends each one it started."""

    def __init__(self, env: dict[str, str], logs: Path) -> None:
        self.env = env
        self.logs = logs
        self.started: list[tuple[str, subprocess.Popen]] = []

    def start(self, name: str, *args: str) -> None:
        with (self.logs / f"{name}.log").open("wb") as log:
            process = subprocess.Popen(
                [sys.executable, "-m", "celery", "-A", "latsite", *args],
                cwd=ROOT,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.started.append((name, process))

    def check_running(self) -> None:
        for name, process in self.started:
            if process.poll() is not None:
                raise AssertionError(
                    f"celery {name} exited with {process.returncode}\n{self.tail()}"
                )

    def tail(self, lines: int = 40) -> str:
        out = []
        for name, _ in self.started:
            text = (self.logs / f"{name}.log").read_text(errors="replace").splitlines()
            out.append(f"--- {name} ---\n" + "\n".join(text[-lines:]))
        return "\n".join(out)

    def stop(self) -> None:
        for _, process in self.started:
            if process.poll() is None:
                process.terminate()  # warm shutdown
        for _, process in self.started:
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                pass
            # The worker's pool children are in the session (process group) we created.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)


@pytest.fixture
def celery_processes(chain, tmp_path, worker_id) -> Iterator[Processes]:
    broker = broker_url(worker_id)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RPC_URL")}
    env |= {
        "DATABASE_URL": database_url(),
        "CELERY_BROKER_URL": broker,
        "RPC_URL": chain.url,
        "DB_CONN_MAX_AGE": "0",
        "PYTHONUNBUFFERED": "1",
    }
    queue = redis.Redis.from_url(broker)
    queue.flushdb()  # this Redis database belongs to this test alone
    processes = Processes(env, tmp_path)
    try:
        yield processes
    finally:
        processes.stop()
        queue.flushdb()
        queue.close()


def wait_for(condition: Callable[[], bool], processes: Processes, what: str) -> None:
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        if condition():
            return
        processes.check_running()
        time.sleep(0.5)
    raise AssertionError(f"{what} did not happen within {DEADLINE} s\n{processes.tail()}")


def every(seconds: int) -> IntervalSchedule:
    interval, _ = IntervalSchedule.objects.get_or_create(
        every=seconds, period=IntervalSchedule.SECONDS
    )
    return interval


def only_deposit_indexing_every_second() -> None:
    """Ops, in admin: every default job off but deposit indexing, which runs every second."""
    ensure_default_schedules()
    for task in PeriodicTask.objects.filter(name__in=[d.name for d in DEFAULT_SCHEDULES]):
        task.enabled = task.name == "lat-deposit-indexing"
        if task.enabled:
            task.interval = every(1)
        task.save()


@pytest.mark.django_db(transaction=True)
def test_beat_and_worker_run_the_schedules_ops_set(chain, settings, tmp_path, celery_processes):
    settings.RPC_URL = chain.url
    call_command("lat_import", *map(str, write_manifests(chain.manifests, tmp_path / "m")))
    lats = list(Lat.objects.order_by("id"))
    expected = {lat.id: chain_deposit_count(chain, chain.lat(lat.symbol)) for lat in lats}
    assert all(expected.values())

    only_deposit_indexing_every_second()

    celery_processes.start(
        "worker",
        "worker",
        "--loglevel=INFO",
        "--pool=prefork",
        "--concurrency=1",
        f"--hostname=e2e-{os.getpid()}@localhost",
        "--without-gossip",
        "--without-mingle",
        "--without-heartbeat",
    )
    celery_processes.start("beat", "beat", "--loglevel=INFO", "--max-interval=1")

    def deposits_indexed() -> bool:
        counts = {lat.id: Deposit.objects.filter(lat=lat).count() for lat in lats}
        done = SyncStatus.objects.filter(job="deposits", last_success_at__isnull=False)
        return counts == expected and done.count() == len(lats)

    wait_for(deposits_indexed, celery_processes, "scheduled deposit indexing")
    assert not SyncStatus.objects.filter(job="state").exists()  # that job is off

    # Ops switch the state refresh on, every 2 s, and deposits off, while beat runs.
    state = PeriodicTask.objects.get(name="lat-state-refresh")
    state.enabled = True
    state.interval = every(2)
    state.save()
    deposits = PeriodicTask.objects.get(name="lat-deposit-indexing")
    deposits.enabled = False
    deposits.save()

    def states_refreshed() -> bool:
        done = SyncStatus.objects.filter(job="state", last_success_at__isnull=False)
        return done.count() == len(lats)

    wait_for(states_refreshed, celery_processes, "the state refresh ops switched on")
    for lat in Lat.objects.all():
        lt = chain.contract("LiquidToken", lat.proxy_address)
        assert int(lat.total_supply) == lt.functions.totalSupply().call()
    assert "lat-state-refresh" in (tmp_path / "beat.log").read_text()


def published(broker: str, task: str) -> list[int]:
    """The pid of the beat that published each message of `task` in the queue, in order (a
    message's `origin` header names its publisher: gen<pid>@host)."""
    queue = redis.Redis.from_url(broker)
    try:
        messages = [json.loads(raw) for raw in reversed(queue.lrange("celery", 0, -1))]
    finally:
        queue.close()
    return [
        int(message["headers"]["origin"].split("@")[0].removeprefix("gen"))
        for message in messages
        if message["headers"]["task"] == task
    ]


@pytest.mark.django_db(transaction=True)
def test_two_beats_enqueue_each_job_once_and_a_frozen_one_publishes_nothing(
    celery_processes, worker_id
):
    """Two beats on the same schedules and broker, no worker: the messages of a job due every
    second come from one beat only; frozen (SIGSTOP), the other takes over within
    FOLLOWER_LEASE_SECONDS (+ 2 s); woken (SIGCONT), the first publishes nothing more."""
    lease = 4
    only_deposit_indexing_every_second()
    task = PeriodicTask.objects.get(name="lat-deposit-indexing").task
    broker = broker_url(worker_id)
    celery_processes.env["FOLLOWER_LEASE_SECONDS"] = str(lease)
    celery_processes.start("beat-a", "beat", "--loglevel=INFO", "--max-interval=1")
    celery_processes.start("beat-b", "beat", "--loglevel=INFO", "--max-interval=1")
    beats = {process.pid: process for _, process in celery_processes.started}

    wait_for(lambda: len(published(broker, task)) >= 3, celery_processes, "three ticks")
    time.sleep(5)  # both beats up and ticking
    before = published(broker, task)
    assert len(set(before)) == 1, before  # one beat schedules
    leader = before[0]
    assert leader in beats
    window_start, started = len(before), time.monotonic()
    time.sleep(5)
    ticks = published(broker, task)[window_start:]
    assert len(ticks) <= (time.monotonic() - started) + 2, ticks  # once per tick, not twice
    assert set(ticks) == {leader}

    beats[leader].send_signal(signal.SIGSTOP)
    frozen = time.monotonic()
    seen = len(published(broker, task))
    try:
        wait_for(
            lambda: any(pid != leader for pid in published(broker, task)[seen:]),
            celery_processes,
            "the standby's first publication",
        )
        assert time.monotonic() - frozen <= lease + 2
    finally:
        beats[leader].send_signal(signal.SIGCONT)
    woken = len(published(broker, task))
    time.sleep(lease + 2)
    after = published(broker, task)[woken:]
    assert after
    assert leader not in after, after
