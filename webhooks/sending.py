"""One attempt of a delivery: an HTTP POST of the payload, signed, to the address the URL's
host resolves to now (checked against the rules again: targets.py), within
settings.WEBHOOK_TIMEOUT seconds from the name's resolution to the last byte, no redirect
followed, at most settings.WEBHOOK_MAX_BYTES of the answer read. No database here: the
dispatcher's threads run it.

Connections are kept alive between attempts (ConnectionPools): a pool per endpoint origin and
checked address, so a kept connection is only ever used for the address its host resolves to
at the attempt (a host resolving elsewhere gets a new connection to the new, checked, address).
A connection is kept only after an answer read to its end that does not close it; one found
closed by the receiver while idle is dropped, and a request that fails on a kept connection
before any answer (the receiver closed it meanwhile) is sent once more on a new one. Written on
http.client rather than urllib3's pools for the reasons core/outbound.py gives (the pinned
address, one deadline for the whole exchange)."""

from __future__ import annotations

import http.client
import ssl
import threading
import time
from dataclasses import dataclass
from email.utils import parsedate_to_datetime

from django.conf import settings

from core import outbound
from webhooks.signing import signature_header
from webhooks.targets import NOUN, webhook_address, webhook_target

HEAD_BYTES = 1024  # of the answer, kept with the attempt
USER_AGENT = "lat-service-webhooks/1"


@dataclass(frozen=True)
class AttemptResult:
    status_code: int | None  # None: no answer (error says why)
    error: str
    duration_ms: int
    response_head: str
    retry_after: float | None = None  # seconds, from a 429's or 503's Retry-After
    refused: str | None = None  # the rule that refused the URL; nothing was sent

    @property
    def delivered(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300

    @property
    def retryable(self) -> bool:
        """A network error, a timeout, a 5xx, a 408 or a 429: tried again on the schedule. A URL
        the rules refuse is not (but a host that does not resolve is)."""
        if self.refused is not None:
            return self.refused == "resolve"
        if self.status_code is None:
            return True
        return self.status_code >= 500 or self.status_code in (408, 429)


@dataclass(frozen=True)
class Signed:
    """What one attempt sends."""

    url: str
    message_id: str
    body: bytes
    secrets: tuple[str, ...]


PoolKey = tuple[str, str, int, outbound.Address]


class ConnectionPools:
    """Kept-alive connections, per endpoint origin and checked address: at most `per_key` idle
    ones each, none idle longer than `idle_seconds`. Thread-safe (the dispatcher's senders)."""

    def __init__(self, *, per_key: int = 4, idle_seconds: float = 30.0) -> None:
        self._per_key = per_key
        self._idle_seconds = idle_seconds
        self._idle: dict[PoolKey, list[tuple[float, outbound.PinnedConnection]]] = {}
        self._lock = threading.Lock()

    def take(self, key: PoolKey) -> outbound.PinnedConnection | None:
        """An idle connection of `key` still open, or None."""
        while True:
            with self._lock:
                kept = self._idle.get(key)
                if not kept:
                    return None
                since, connection = kept.pop()
            if time.monotonic() - since < self._idle_seconds and not connection.idle_closed():
                return connection
            connection.dispose()

    def give(self, key: PoolKey, connection: outbound.PinnedConnection) -> None:
        now, stale = time.monotonic(), []
        with self._lock:
            kept = self._idle.setdefault(key, [])
            if len(kept) < self._per_key:
                kept.append((now, connection))
            else:
                stale.append(connection)
            if len(self._idle) > 64:  # now and then: pools left idle
                for other in [k for k, v in self._idle.items() if not v]:
                    del self._idle[other]
        for connection in stale:
            connection.dispose()

    def close(self) -> None:
        with self._lock:
            kept, self._idle = self._idle, {}
        for connections in kept.values():
            for _, connection in connections:
                connection.dispose()


def attempt_send(signed: Signed, *, pools: ConnectionPools | None = None) -> AttemptResult:
    """One attempt; with `pools`, on a kept-alive connection where one is idle (and kept for
    the next attempt when the answer leaves it open)."""
    started = time.perf_counter()

    def ms() -> int:
        return int((time.perf_counter() - started) * 1000)

    timeout = settings.WEBHOOK_TIMEOUT
    deadline = outbound.Deadline(timeout, what="the webhook deadline")
    try:
        target = webhook_target(signed.url)
        address = webhook_address(target, deadline=deadline)
    except outbound.OutboundRefused as exc:
        return AttemptResult(None, f"refused: {exc}", ms(), "", refused=exc.rule)
    except TimeoutError:  # the name did not resolve within the deadline
        return AttemptResult(None, f"no answer within {timeout:g} s", ms(), "")
    timestamp = int(time.time())
    headers = {
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        "webhook-id": signed.message_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": signature_header(
            signed.secrets, message_id=signed.message_id, timestamp=timestamp, body=signed.body
        ),
    }
    if pools is None:
        headers["Connection"] = "close"
    key: PoolKey = (target.scheme, target.host, target.port, address)
    connection = pools.take(key) if pools is not None else None
    reused = connection is not None
    if connection is None:
        connection = _connection(target, address, deadline)
    else:
        connection.renew(deadline)
    keep = False
    try:
        try:
            connection.request("POST", target.path, body=signed.body, headers=headers)
            response = connection.getresponse()
        except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
            if not reused:
                raise
            # The receiver closed the kept connection meanwhile: once more on a new one.
            connection.dispose()
            connection = _connection(target, address, deadline)
            connection.request("POST", target.path, body=signed.body, headers=headers)
            response = connection.getresponse()
        raw, more = outbound.read_capped(response, settings.WEBHOOK_MAX_BYTES)
        keep = pools is not None and not more and not response.will_close
        error = ""
        if 300 <= response.status < 400:
            error = "redirect not followed"
        return AttemptResult(
            response.status,
            error,
            ms(),
            raw[:HEAD_BYTES].decode("utf-8", "replace").replace("\x00", "\ufffd"),  # no NUL in text
            retry_after=_retry_after(response.getheader("Retry-After")),
        )
    except TimeoutError:
        return AttemptResult(None, f"no answer within {timeout:g} s", ms(), "")
    except ssl.SSLCertVerificationError:
        return AttemptResult(None, "the TLS certificate could not be verified", ms(), "")
    except (OSError, ValueError, http.client.HTTPException) as exc:
        return AttemptResult(None, f"connection failed: {type(exc).__name__}", ms(), "")
    finally:
        if keep and pools is not None:
            pools.give(key, connection)
        else:
            connection.dispose()


def _connection(
    target: outbound.Target, address: outbound.Address, deadline: outbound.Deadline
) -> outbound.PinnedConnection:
    connection_class = (
        outbound.PinnedHTTPSConnection if target.scheme == "https" else outbound.PinnedConnection
    )
    return connection_class(target, address, deadline)


def _retry_after(value: str | None) -> float | None:
    """Retry-After in seconds (an HTTP date is read as well); None when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


PROBE_TIMEOUT = 3.0  # seconds a registration waits for the URL's answer to a HEAD


def url_probe(url: str) -> None:
    """At registration: a HEAD to the URL (its address checked as for an attempt), refused with
    OutboundRefused (rule `redirect`) when it answers a redirect, which no attempt would follow.
    An endpoint that does not answer, or answers anything else, is not refused: it may not be
    up yet, and many receivers take nothing but POST."""
    target = webhook_target(url)
    deadline = outbound.Deadline(PROBE_TIMEOUT, what="the webhook probe deadline")
    try:
        address = webhook_address(target, deadline=deadline)
    except TimeoutError:
        return
    connection = _connection(target, address, deadline)
    try:
        connection.request("HEAD", target.path, headers={"User-Agent": USER_AGENT})
        status = connection.getresponse().status
    except (OSError, ValueError, http.client.HTTPException):
        return
    finally:
        connection.dispose()
    if 300 <= status < 400:
        raise outbound.OutboundRefused(
            f"the {NOUN} of {target.origin} answers HTTP {status}, a redirect", rule="redirect"
        )
