"""The production server under test: gunicorn on 127.0.0.1, started and always stopped.

with gunicorn(env, workers=3) as server:
    http_load.run(server.url("/lat"), ...)
"""

from __future__ import annotations

import contextlib
import http.client
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from bench.config import PYTHON, REPO

HOST = "127.0.0.1"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


@dataclass
class Server:
    host: str
    port: int
    workers: int
    process: subprocess.Popen
    log_path: Path

    def url(self, path: str) -> str:
        return f"http://{self.host}:{self.port}{path}"

    def get(self, path: str, timeout: float = 10.0) -> tuple[int, bytes]:
        """One plain GET; (status, body)."""
        conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        try:
            conn.request("GET", path, headers={"Host": self.host})
            response = conn.getresponse()
            return response.status, response.read()
        finally:
            conn.close()

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


def _wait_ready(server: Server, path: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    last = "no answer"
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(
                f"gunicorn exited with {server.process.returncode} before answering:\n"
                f"{server.log_tail()}"
            )
        try:
            status, body = server.get(path, timeout=2.0)
        except OSError as exc:
            last = str(exc)
        else:
            if status == 200:
                return
            last = f"HTTP {status}: {body[:200]!r}"
        time.sleep(0.2)
    raise RuntimeError(
        f"gunicorn did not answer {path} in {timeout:.0f} s ({last}):\n{server.log_tail()}"
    )


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is not None:
        return
    # Graceful stop of the master (it stops its workers); then the whole group it leads.
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=5)


@contextlib.contextmanager
def gunicorn(
    env: dict[str, str],
    *,
    workers: int,
    threads: int = 0,
    extra_args: tuple[str, ...] = (),
    ready_path: str = "/health",
    ready_timeout: float = 60.0,
    log=print,
) -> Iterator[Server]:
    """Run `gunicorn latsite.wsgi:application` with sync workers (gthread workers of `threads`
    threads each when `threads` > 0) and no access log.

    `env` is the whole environment of the server (DATABASE_URL etc.). The server is stopped on
    leaving the block, whatever happens inside it.
    """
    port = free_port()
    log_dir = Path(tempfile.mkdtemp(prefix="lat-bench-"))
    log_path = log_dir / "gunicorn.log"
    if threads > 0:
        worker_args = ("--worker-class", "gthread", "--threads", str(threads))
        kind = f"gthread workers x {threads} threads"
    else:
        worker_args, kind = ("--worker-class", "sync"), "sync workers"
    cmd = [
        PYTHON,
        "-m",
        "gunicorn",
        "latsite.wsgi:application",
        "--bind",
        f"{HOST}:{port}",
        "--workers",
        str(workers),
        *worker_args,
        "--error-logfile",
        str(log_path),
        "--log-level",
        "warning",
        "--timeout",
        "60",
        *extra_args,
    ]  # no --access-logfile: gunicorn writes no access log without it
    with open(os.devnull, "rb") as devnull, open(log_path, "ab") as out:
        process = subprocess.Popen(
            cmd,
            cwd=REPO,
            env=env,
            stdin=devnull,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, so that it can be stopped whole
        )
    server = Server(HOST, port, workers, process, log_path)
    try:
        started = time.monotonic()
        _wait_ready(server, ready_path, ready_timeout)
        log(
            f"server: gunicorn pid {process.pid} on {HOST}:{port}, {workers} {kind}, "
            f"ready in {time.monotonic() - started:.1f} s (log {log_path})"
        )
        yield server
    finally:
        _stop(process)
        # The log only matters while the server runs (failures quote its tail); keep it only
        # if the server died on its own.
        if process.returncode in (0, -signal.SIGTERM, -signal.SIGKILL):
            shutil.rmtree(log_dir, ignore_errors=True)
        else:
            log(f"server: gunicorn exited with {process.returncode}; its log is {log_path}")
