"""Processes a test starts (a Redis, a Procfile line): stopped politely, then for sure; the
Procfile's lines run as a platform runs them, its `web` line on a free port; `manage.py` in a
process of its own; the test database as such a process reads it; which database answered a
web process's reads."""

from __future__ import annotations

import contextlib
import http.client
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

from tests.ports import closed_port

REPO = Path(__file__).resolve().parents[1]


def terminate(process: subprocess.Popen, timeout: float = 10) -> None:
    """SIGTERM, and SIGKILL if it has not ended within `timeout` seconds."""
    process.terminate()
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout)


def database_url() -> str:
    """The test database (test_lat_gw0, ...) as a DATABASE_URL for the subprocesses."""
    from django.conf import settings

    db = settings.DATABASES["default"]
    auth = quote(db["USER"] or "")
    if db.get("PASSWORD"):
        auth += ":" + quote(db["PASSWORD"])
    host = db["HOST"] or "127.0.0.1"
    port = db["PORT"] or 5432
    return f"postgres://{auth}@{host}:{port}/{db['NAME']}"


def procfile_line(name: str) -> str:
    """The command of the Procfile's `name` line, as it stands."""
    for line in (REPO / "Procfile").read_text().splitlines():
        if line.startswith(f"{name}:"):
            return line.split(":", 1)[1].strip()
    raise KeyError(name)


@contextlib.contextmanager
def procfile(name: str, env: dict[str, str], log: Path | None = None) -> Iterator[subprocess.Popen]:
    """The Procfile's `name` line as it is, run by the shell as a platform runs it (its
    ${VARIABLES} from `env`, the venv's executables first on PATH), output to `log` (default:
    discarded); stopped (SIGTERM, then SIGKILL) on exit."""
    venv = str(Path(sys.executable).parent)
    env = env | {"PATH": f"{venv}:{env.get('PATH', '/usr/bin:/bin')}", "PYTHONUNBUFFERED": "1"}
    with contextlib.ExitStack() as stack:
        out = stack.enter_context(log.open("wb")) if log else subprocess.DEVNULL
        process = subprocess.Popen(
            ["/bin/sh", "-c", f"exec {procfile_line(name)}"],
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT if log else subprocess.DEVNULL,
        )
        try:
            yield process
        finally:
            terminate(process)


@contextlib.contextmanager
def procfile_web(env: dict[str, str] | None = None) -> Iterator[str]:
    """The Procfile's `web` line as it is, on a free port, one worker, in `env` (default:
    this process's); yields its "host:port" once the worker answers."""
    port = closed_port()
    env = (os.environ if env is None else env) | {"PORT": str(port), "WEB_CONCURRENCY": "1"}
    with procfile("web", env) as process:
        deadline = time.monotonic() + 60
        while True:
            try:  # the worker answers (it loads the application after the port listens)
                connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                connection.request("GET", "/version")
                connection.getresponse().read()
                connection.close()
                break
            except OSError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise RuntimeError("the web process did not answer") from None
                time.sleep(0.1)
        yield f"127.0.0.1:{port}"


def manage(*args: str, database: str, replica: str = "") -> str:
    """`manage.py *args` in a process of its own on `database` (and read replica `replica`):
    its output; fails the test on a non-zero exit."""
    done = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=REPO,
        env=os.environ | {"DATABASE_URL": database, "DATABASE_REPLICA_URLS": replica},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def database_reads(address: str) -> dict[str, float]:
    """The web process at `address`'s read requests by the database that answered them
    ("primary", "replica1", ...: its lat_database_reads_total metric)."""
    connection = http.client.HTTPConnection(*address.split(":"), timeout=30)
    try:
        connection.request("GET", "/internal/metrics")
        response = connection.getresponse()
        body = response.read().decode()
    finally:
        connection.close()
    assert response.status == 200
    found = re.findall(r'^lat_database_reads_total\{target="(\w+)"\} (\S+)$', body, re.M)
    return {target: float(count) for target, count in found}


def moved(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """The counts that changed from `before` to `after`, by how much."""
    return {
        k: after.get(k, 0) - before.get(k, 0) for k in after if after.get(k, 0) != before.get(k, 0)
    }


def raw_exchange(host: str, port: int, request: bytes) -> tuple[int, dict[str, str], bytes]:
    """Bytes sent as they are, on a connection the server closes: the answer's status, its
    headers (lower-case names) and its body."""
    with socket.create_connection((host, port), timeout=30) as sock:
        sock.sendall(request)
        raw = b""
        while chunk := sock.recv(65536):
            raw += chunk
    head, _, body = raw.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(status_line.split()[1]), headers, body
