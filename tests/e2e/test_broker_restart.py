"""A real Celery worker survives its Redis broker going away: it reconnects by itself
(CELERY_BROKER_CONNECTION_RETRY, unlimited retries) and runs a task enqueued after Redis is
back. The broker is a redis-server of this test's own, on a free port, stopped and started
again on the same port (empty, as after a restart without persistence)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from celery import Celery

from tests.redisserver import RedisServer

pytestmark = pytest.mark.xdist_group("celery")

ROOT = Path(__file__).resolve().parents[2]
DEADLINE = 60  # seconds for a worker to start, or to reconnect and run a task


@pytest.fixture
def broker() -> Iterator[RedisServer]:
    server = RedisServer()
    server.start()
    yield server
    server.close()


@pytest.fixture
def worker(broker, tmp_path) -> Iterator[Path]:
    log = tmp_path / "worker.log"
    env = os.environ | {"CELERY_BROKER_URL": broker.url(), "PYTHONUNBUFFERED": "1"}
    with log.open("wb") as out:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "latsite",
                "worker",
                "--loglevel=INFO",
                "--pool=solo",
                f"--hostname=broker-restart-{os.getpid()}@localhost",
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
            ],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        wait_for(lambda: "ready." in log.read_text(errors="replace"), process, log, "start-up")
        yield log
    finally:
        process.terminate()
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)


def wait_for(condition: Callable[[], bool], process, log: Path, what: str) -> None:
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        if condition():
            return
        if process is not None and process.poll() is not None:
            raise AssertionError(f"the worker exited during {what}\n{log.read_text()}")
        time.sleep(0.2)
    raise AssertionError(f"{what} did not happen within {DEADLINE} s\n{log.read_text()[-4000:]}")


def enqueue(broker: RedisServer) -> str:
    """Publish a built-in task (`celery.accumulate`, no database needed) from a fresh client."""
    task_id = uuid.uuid4().hex
    app = Celery("probe", broker=broker.url(), set_as_current=False)
    app.conf.broker_connection_retry_on_startup = False
    try:
        app.send_task("celery.accumulate", args=[1, 2], task_id=task_id)
    finally:
        app.close()
    return task_id


def ran(log: Path, task_id: str) -> Callable[[], bool]:
    return lambda: f"celery.accumulate[{task_id}] succeeded" in log.read_text(errors="replace")


def test_the_worker_reconnects_after_redis_restarts(broker, worker):
    before = enqueue(broker)
    wait_for(ran(worker, before), None, worker, "the first task")

    broker.stop()
    wait_for(
        lambda: "Connection to broker lost" in worker.read_text(errors="replace"),
        None,
        worker,
        "noticing the lost broker",
    )
    time.sleep(1)  # down for a while: the worker's first reconnection attempts fail
    broker.start()

    after = enqueue(broker)
    wait_for(ran(worker, after), None, worker, "the task enqueued after the restart")
