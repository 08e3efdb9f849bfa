"""gunicorn serving the service on 127.0.0.1 and a free port: started, waited for, stopped."""

from __future__ import annotations

import contextlib
import http.client
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from bench import PYTHON, REPO
from devchain.anvil import free_port

HOST = "127.0.0.1"


@dataclass
class Server:
    port: int
    process: subprocess.Popen
    log_path: Path

    def url(self, path: str) -> str:
        return f"http://{HOST}:{self.port}{path}"

    def get(self, path: str, timeout: float = 10.0) -> tuple[int, bytes]:
        """One GET: (status, body)."""
        conn = http.client.HTTPConnection(HOST, self.port, timeout=timeout)
        try:
            conn.request("GET", path, headers={"Host": HOST})
            response = conn.getresponse()
            return response.status, response.read()
        finally:
            conn.close()

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def wait_ready(self, path: str = "/health", timeout: float = 60.0) -> None:
        deadline, last = time.monotonic() + timeout, "no answer"
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"gunicorn exited with {self.process.returncode} before answering:\n"
                    f"{self.log_tail(40)}"
                )
            try:
                status, body = self.get(path, timeout=2.0)
            except OSError as exc:
                last = str(exc)
            else:
                if status == 200:
                    return
                last = f"HTTP {status}: {body[:200]!r}"
            time.sleep(0.2)
        raise RuntimeError(
            f"gunicorn did not answer {path} in {timeout:.0f} s ({last}):\n{self.log_tail(40)}"
        )

    def stop(self) -> None:
        """SIGTERM to the master (it stops its workers), then SIGKILL to its whole group."""
        if self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=5)


@contextlib.contextmanager
def gunicorn(
    env: dict[str, str], *, workers: int, threads: int, log: Callable[[str], None]
) -> Iterator[Server]:
    """`gunicorn latsite.wsgi:application` with `env` as its whole environment, sync workers
    (gthread workers of `threads` threads when `threads` > 0), no access log."""
    port, log_dir = free_port(), Path(tempfile.mkdtemp(prefix="lat-bench-"))
    if threads > 0:
        kind, worker_args = f"gthread workers x {threads} threads", ["gthread", "--threads"]
        worker_args.append(str(threads))
    else:
        kind, worker_args = "sync workers", ["sync"]
    cmd = [PYTHON, "-m", "gunicorn", "latsite.wsgi:application", "--bind", f"{HOST}:{port}"]
    cmd += ["--workers", str(workers), "--worker-class", *worker_args, "--timeout", "60"]
    cmd += ["--error-logfile", str(log_dir / "gunicorn.log"), "--log-level", "warning"]
    with open(log_dir / "gunicorn.log", "ab") as out:
        process = subprocess.Popen(
            cmd,
            cwd=REPO,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, so that it can be stopped whole
        )
    server = Server(port, process, log_dir / "gunicorn.log")
    try:
        started = time.monotonic()
        server.wait_ready()
        log(
            f"server: gunicorn pid {process.pid} on {HOST}:{port}, {workers} {kind}, "
            f"ready in {time.monotonic() - started:.1f} s (log {server.log_path})"
        )
        yield server
    finally:
        server.stop()
        # Keep the log only if the server died on its own.
        if process.returncode in (0, -signal.SIGTERM, -signal.SIGKILL):
            shutil.rmtree(log_dir, ignore_errors=True)
        else:
            log(f"server: gunicorn exited with {process.returncode}; its log is {server.log_path}")
