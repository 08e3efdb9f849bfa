"""A per-process circuit breaker in front of Redis, so that a Redis outage costs the API latency,
never its answers.

Every optional use of the cache (rate-limit counters, the read-document cache, its invalidation,
the demo's job locks) goes through `call()`. The first Redis error of an outage (a refused
connection fails at once; a Redis that accepts connections and never answers, after
REDIS_CONNECT_TIMEOUT / REDIS_SOCKET_TIMEOUT) opens the breaker: for REDIS_RETRY_AFTER seconds
every `call()` in this process returns UNAVAILABLE without touching Redis, so one request may
touch Redis several times and still pay at most one timeout, and only the first request of an
outage pays it. After that, one caller probes; the others keep skipping Redis until the probe
answers or its own timeouts have passed. Success closes the breaker and runs the recovery
callbacks (documents.py re-sends the invalidations that could not reach Redis).

Only Redis and connection errors are caught (redis-py's, django-redis's wrapper, and OSError,
of which ConnectionError and TimeoutError are subclasses): a bug still raises. The warning is
logged at most once a minute per process, not per request.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Final

from django.conf import settings
from django_redis.exceptions import ConnectionInterrupted
from redis.exceptions import RedisError

logger = logging.getLogger(__name__)

REDIS_ERRORS: Final = (RedisError, ConnectionInterrupted, ConnectionError, TimeoutError, OSError)
LOG_EVERY = 60.0  # seconds between two warnings of one process


class _Unavailable:
    def __repr__(self) -> str:
        return "UNAVAILABLE"

    def __bool__(self) -> bool:
        return False


UNAVAILABLE: Final = _Unavailable()


class RedisBreaker:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open_until = 0.0  # time.monotonic() before which Redis is left alone
        self._failing = False  # an error seen and no success since
        self._last_warning = float("-inf")
        self._recovery: list[Callable[[], None]] = []

    def allow(self) -> bool:
        """Whether to try Redis now; past the pause, the first caller becomes the probe."""
        now = time.monotonic()
        if not self._failing and now >= self._open_until:  # healthy: no lock
            return True
        with self._lock:
            if now < self._open_until:
                return False
            if self._failing:
                # Half-open: this caller probes; the others wait for its answer at most as
                # long as its timeouts last.
                budget = settings.REDIS_CONNECT_TIMEOUT + settings.REDIS_SOCKET_TIMEOUT + 0.1
                self._open_until = now + budget
            return True

    def failure(self, what: str, exc: BaseException) -> None:
        now = time.monotonic()
        with self._lock:
            self._failing = True
            self._open_until = now + settings.REDIS_RETRY_AFTER
            warn = now - self._last_warning >= LOG_EVERY
            if warn:
                self._last_warning = now
        if warn:
            logger.warning(
                "Redis is unreachable (%s failed: %s: %s): rate limits fail open and documents "
                "are built from the database; Redis is tried again every %s s "
                "(logged at most once a minute)",
                what,
                type(exc).__name__,
                exc,
                settings.REDIS_RETRY_AFTER,
            )

    def success(self) -> None:
        if not self._failing:  # the common case: no lock
            return
        with self._lock:
            recovered, self._failing, self._open_until = self._failing, False, 0.0
            callbacks = list(self._recovery)
        if recovered:
            logger.info("Redis answers again")
            for callback in callbacks:
                callback()

    def on_recovery(self, callback: Callable[[], None]) -> None:
        """Run `callback` (which must not raise) whenever Redis answers after a failure."""
        with self._lock:
            if callback not in self._recovery:
                self._recovery.append(callback)

    @property
    def is_open(self) -> bool:
        return time.monotonic() < self._open_until

    def reset(self) -> None:
        """Forget every failure (tests)."""
        with self._lock:
            self._failing = False
            self._open_until = 0.0
            self._last_warning = float("-inf")


breaker = RedisBreaker()


def call(what: str, operation: Callable[[], Any]) -> Any:
    """`operation()`, or UNAVAILABLE when Redis failed it or is being left alone."""
    if not breaker.allow():
        return UNAVAILABLE
    try:
        result = operation()
    except REDIS_ERRORS as exc:
        breaker.failure(what, exc)
        return UNAVAILABLE
    breaker.success()
    return result
