"""Processes a test starts (a Redis, a Procfile line): stopped politely, then for sure; the
Procfile's `web` line on a free port; the test database as such a process reads it."""

from __future__ import annotations

import contextlib
import http.client
import shlex
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


@contextlib.contextmanager
def procfile_web(env: dict[str, str] | None = None) -> Iterator[str]:
    """The Procfile's `web` line as it is, on a free port, one worker, in `env` (default:
    this process's); yields its "host:port" once the worker answers."""
    line = next(
        line.split(":", 1)[1]
        for line in (REPO / "Procfile").read_text().splitlines()
        if line.startswith("web:")
    )
    port = closed_port()
    line = line.replace("${PORT:-8000}", str(port)).replace("${WEB_CONCURRENCY:-4}", "1")
    command = shlex.split(line)
    command[0] = str(Path(sys.executable).with_name(command[0]))  # the venv's gunicorn
    process = subprocess.Popen(command, cwd=REPO, env=env, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:  # the worker answers (it loads the application after the port listens)
                connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                connection.request("GET", "/version")
                connection.getresponse().read()
                connection.close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError("the web process did not answer") from None
                time.sleep(0.1)
        yield f"127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(10)


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
