"""JSON-RPC batches over HTTP within a total deadline: how simulate-deposit reaches its node.

web3's HTTPProvider (requests over urllib3) bounds each socket operation, never a whole exchange:
a node that trickles its answer keeps every read within any timeout, so a deadline on it needs
a second thread to give up waiting. Here every socket operation gets only what is left of the
deadline, and none once it has passed, so the call itself ends by the deadline, in the caller's
thread. The batch is encoded and its answer parsed here (`json`), not through web3's middleware
and formatters; each answer is then judged as the transport judges it (`transport.check`), and
counted and timed the same way (core/telemetry.py). Written on http.client, as
lats/metadata.py is: no library in the stack bounds a whole HTTP exchange (urllib3's
`Timeout.total` bounds the connect and each read, not the answer).

Connections are kept alive, a few idle ones per node, the most recent first; one the node closed
meanwhile is dropped before use. Opening one is the only step that runs on another thread (a
small pool per process): name resolution blocks for the resolver's own timeouts, which no
socket timeout bounds, so the caller waits for a new connection at most until its deadline, and
one that comes later is closed.

Like `transport.http_web3`: no retry (a request is sent once), the environment's proxy read
once (an `http://` proxy: plain HTTP through it, HTTPS through a CONNECT tunnel; another kind
of proxy is refused), credentials in the URL sent as HTTP basic authentication, TLS
certificates checked against requests' CA bundle. Messages never carry the URL (it may hold an
API key); the cause of a failure is chained (`transport.error_kind` labels the metrics by it).
"""

from __future__ import annotations

import base64
import functools
import http.client
import json
import os
import select
import socket
import ssl
import threading
import urllib.parse
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import requests

from chain.errors import ChainUnavailable
from chain.transport import checked_batch
from core.deadline_io import DeadlineSocket, seconds_left
from core.telemetry import UNKNOWN_CHAIN

MAX_IDLE = 8  # idle connections kept per node
CONNECT_THREADS = 4  # threads per process that open connections


class _Connection(http.client.HTTPConnection):
    """A kept-alive connection whose socket operations end by `deadline`, set per request."""

    auto_open = 0  # opened on the connect pool (_ConnectPool), never by http.client here
    deadline = 0.0
    raw: socket.socket | None = None
    _body = b""

    def post(self, target: str, body: bytes, headers: dict[str, str]) -> None:
        """Send a POST whose headers and body leave in one write (http.client's request()
        makes two: one more wake-up of the node, and one more packet)."""
        self.putrequest("POST", target)
        for name, value in headers.items():
            self.putheader(name, value)
        self.putheader("Content-Length", str(len(body)))
        self._body = body
        self.endheaders()

    def send(self, data: Any) -> None:
        body, self._body = self._body, b""
        super().send(data + body if body else data)

    def connect(self) -> None:
        super().connect()
        self.raw = self.sock
        self.sock = DeadlineSocket(self.sock, self._left)

    def _left(self) -> float:
        """Seconds left before this request's deadline; TimeoutError once none are."""
        return seconds_left(self.deadline)

    def idle(self) -> bool:
        """Open and silent: nothing to read (the node's close, or anything unasked) yet."""
        if self.raw is None:
            return False
        poller = select.poll()
        poller.register(self.raw, select.POLLIN)
        return not poller.poll(0)

    def dispose(self) -> None:
        self.close()
        if self.raw is not None:
            self.raw.close()
            self.raw = None


class _TLSConnection(_Connection, http.client.HTTPSConnection):
    pass


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """Certificates and host names checked against the CA bundle requests uses (certifi's)."""
    return ssl.create_default_context(cafile=requests.utils.DEFAULT_CA_BUNDLE_PATH)


class _ConnectPool:
    """The threads that open connections; a forked server worker makes its own."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pid = 0
        self._pool: ThreadPoolExecutor | None = None

    def open(self, connection: _Connection, deadline: float) -> _Connection:
        """`connection` connected, or TimeoutError at the deadline (the late one is closed)."""
        left = seconds_left(deadline)
        connection.timeout = left
        future = self._executor().submit(connection.connect)
        try:
            future.result(timeout=left)
        except TimeoutError:
            if not future.cancel():
                future.add_done_callback(lambda _: connection.dispose())
            raise
        except BaseException:
            connection.dispose()
            raise
        return connection

    def _executor(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None or self._pid != os.getpid():
                self._pid = os.getpid()
                self._pool = ThreadPoolExecutor(CONNECT_THREADS, thread_name_prefix="rpc-connect")
            return self._pool


_connect_pool = _ConnectPool()


def _basic_auth(parts: urllib.parse.SplitResult) -> str | None:
    if parts.username is None and parts.password is None:
        return None
    user = urllib.parse.unquote(parts.username or "")
    password = urllib.parse.unquote(parts.password or "")
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode("ascii")


class DeadlineClient:
    """JSON-RPC batches to the node at `url`, each within the deadline its caller gives.

    `chain` labels its metrics (the chain id; "unknown" where the caller did not say)."""

    def __init__(self, url: str, *, chain: str = UNKNOWN_CHAIN) -> None:
        self.chain = chain
        self._lock = threading.Lock()
        self._idle: list[_Connection] = []
        self._pid = os.getpid()
        try:
            self._new_connection, self._target, self._headers = _route(url)
        except ValueError as exc:
            raise ChainUnavailable("the node's URL is not a valid http(s) URL") from exc

    def batch(self, calls: Sequence[tuple[str, list[Any]]], *, deadline: float) -> list[Any]:
        """One JSON-RPC batch, answered by `deadline` (time.monotonic()); each item is its
        result or the ChainError it stands for, as `Transport.batch` gives them."""
        return checked_batch(self.chain, calls, lambda batch: self._responses(batch, deadline))

    def _responses(self, calls: Sequence[tuple[str, list[Any]]], deadline: float) -> list[Any]:
        body = json.dumps(
            [
                {"jsonrpc": "2.0", "method": method, "params": params, "id": n}
                for n, (method, params) in enumerate(calls)
            ],
            separators=(",", ":"),
        ).encode()
        try:
            status, raw = self._post(body, deadline)
        except (OSError, http.client.HTTPException) as exc:  # TimeoutError is an OSError
            raise ChainUnavailable(f"the node could not be reached ({type(exc).__name__})") from exc
        if not 200 <= status < 300:
            raise ChainUnavailable(f"the node answered HTTP {status}") from requests.HTTPError(
                f"HTTP {status}"
            )
        try:
            responses = json.loads(raw)
        except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError
            raise ChainUnavailable("the node answered something that is not JSON") from exc
        if not isinstance(responses, list) or len(responses) != len(calls):
            raise ChainUnavailable("the node answered a batch with something that is not a batch")
        return _in_request_order(responses)

    def _post(self, body: bytes, deadline: float) -> tuple[int, bytes]:
        connection = self._connection(deadline)
        connection.deadline = deadline
        try:
            connection.post(self._target, body, self._headers)
            response = connection.getresponse()
            raw = response.read()
        except BaseException:
            connection.dispose()
            raise
        if response.will_close:
            connection.dispose()
        else:
            self._keep(connection)
        return response.status, raw

    def _connection(self, deadline: float) -> _Connection:
        """An idle kept-alive connection, else a new one (opened on the connect pool)."""
        while True:
            with self._lock:
                if self._pid != os.getpid():  # a forked worker never shares its parent's sockets
                    self._pid, self._idle = os.getpid(), []
                connection = self._idle.pop() if self._idle else None
            if connection is None:
                return _connect_pool.open(self._new_connection(), deadline)
            if connection.idle():
                return connection
            connection.dispose()

    def _keep(self, connection: _Connection) -> None:
        with self._lock:
            if self._pid == os.getpid() and len(self._idle) < MAX_IDLE:
                self._idle.append(connection)
                return
        connection.dispose()

    def close(self) -> None:
        """Close the idle connections (tests; a process keeps them for its lifetime)."""
        with self._lock:
            idle, self._idle = self._idle, []
        for connection in idle:
            connection.dispose()


def _in_request_order(responses: list[Any]) -> list[Any]:
    """The answers by their ids (0, 1, …) where they carry exactly those, as web3 orders a
    batch; else as received."""
    by_id = {r.get("id"): r for r in responses if isinstance(r, dict) and type(r.get("id")) is int}
    if set(by_id) == set(range(len(responses))):
        return [by_id[n] for n in range(len(responses))]
    return responses


def _route(url: str) -> tuple[Callable[[], _Connection], str, dict[str, str]]:
    """How to reach `url`: a maker of unopened connections, the request target and the
    headers. ValueError for anything but an http(s) URL with a host, or an unusable proxy."""
    parts = urllib.parse.urlsplit(url)
    scheme, host, port = parts.scheme.lower(), parts.hostname, parts.port  # port: ValueError
    if scheme not in ("http", "https") or not host:
        raise ValueError("not an http(s) URL")
    port = port or (443 if scheme == "https" else 80)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if (auth := _basic_auth(parts)) is not None:
        headers["Authorization"] = auth
    proxy = requests.utils.select_proxy(url, requests.utils.get_environ_proxies(url))
    if not proxy:
        if scheme == "https":
            return (
                functools.partial(_TLSConnection, host, port, context=_tls_context()),
                target,
                headers,
            )
        return functools.partial(_Connection, host, port), target, headers
    via = urllib.parse.urlsplit(requests.utils.prepend_scheme_if_needed(proxy, "http"))
    if via.scheme.lower() != "http" or not via.hostname:
        raise ValueError("only an http:// proxy is supported")
    proxy_headers = {} if (auth := _basic_auth(via)) is None else {"Proxy-Authorization": auth}
    via_host, via_port = via.hostname, via.port or 80
    if scheme == "http":  # the absolute URL, to the proxy
        netloc = f"[{host}]" if ":" in host else host
        netloc = netloc if parts.port is None else f"{netloc}:{parts.port}"
        absolute = urllib.parse.urlunsplit(("http", netloc, parts.path or "/", parts.query, ""))
        return (
            functools.partial(_Connection, via_host, via_port),
            absolute,
            {**headers, **proxy_headers},
        )

    def tunnelled() -> _Connection:
        connection = _TLSConnection(via_host, via_port, context=_tls_context())
        connection.set_tunnel(host, port, headers=proxy_headers)
        return connection

    return tunnelled, target, headers
