"""A redis-server of a test's own, on a free 127.0.0.1 port, that the test may stop, pause
(SIGSTOP: it accepts connections and never answers), resume and restart. Never the machine's
shared Redis."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time

import redis

from tests.processes import terminate


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class RedisServer:
    def __init__(self, port: int | None = None) -> None:
        self.port = port or free_port()
        self.process: subprocess.Popen | None = None
        self.paused = False

    def url(self, db: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    def client(self, db: int = 0) -> redis.Redis:
        return redis.Redis.from_url(self.url(db), socket_timeout=2, socket_connect_timeout=2)

    def start(self) -> None:
        """A fresh, empty server on the same port."""
        assert self.process is None or self.process.poll() is not None
        self.process = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--daemonize",
                "no",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.paused = False
        deadline = time.monotonic() + 10
        while True:
            try:
                with self.client() as client:
                    client.ping()
                return
            except redis.ConnectionError as exc:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"redis-server did not start on port {self.port}") from exc
                time.sleep(0.05)

    def stop(self) -> None:
        """Terminate the server: connections are refused until start()."""
        if self.process is None:
            return
        if self.paused:
            self.resume()
        terminate(self.process)

    def pause(self) -> None:
        assert self.process is not None
        assert self.process.poll() is None
        os.kill(self.process.pid, signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        if self.process is not None and self.paused:
            os.kill(self.process.pid, signal.SIGCONT)
        self.paused = False

    def ensure_running(self) -> None:
        self.resume()
        if self.process is None or self.process.poll() is not None:
            self.start()

    def close(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.stop()


def cache_settings(server: RedisServer, settings) -> dict:
    """The default cache (django-redis) on `server`, with the service's Redis timeouts."""
    return {
        "default": {
            "BACKEND": "django_redis.cache.RedisCache",
            "LOCATION": server.url(),
            "OPTIONS": {
                "CLIENT_CLASS": "django_redis.client.DefaultClient",
                "SOCKET_CONNECT_TIMEOUT": settings.REDIS_CONNECT_TIMEOUT,
                "SOCKET_TIMEOUT": settings.REDIS_SOCKET_TIMEOUT,
            },
            "KEY_PREFIX": "lat",
        }
    }
