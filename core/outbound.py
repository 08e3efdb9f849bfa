"""Outbound HTTP to a URL that someone outside chose (an AVS's metadata URI from the chain, a
webhook URL a key holder registered): it must not be a way into internal services, nor a way to
hold or crash a worker. Shared by the metadata fetch (lats/metadata.py) and the webhook
deliveries (webhooks/sending.py); each names its own limits and says what the URL is in its
messages.

- `http`/`https` only (the caller says which), without credentials in the URL, on a port the
  caller allows.
- The host is resolved once; every address must be global (unless the caller allows private
  hosts), and the connection goes to the first of those exact addresses, so a second DNS answer
  (rebinding) is never used. The Host header and the TLS certificate check still name the host.
- No proxy from the environment, no redirect followed (the caller refuses a 3xx), the answer
  read up to a cap, all within a total deadline (every socket operation gets what is left).

Written on http.client rather than requests: requests resolves the host again when it connects
and reads proxies from the environment, and neither its nor urllib3's timeouts bound the whole
exchange.
"""

from __future__ import annotations

import concurrent.futures
import functools
import http.client
import ipaddress
import re
import select
import socket
import ssl
import string
import time
import urllib.parse
from collections.abc import Collection
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from core.deadline_io import DeadlineSocket, seconds_left

_CHUNK = 8192
_HOST_NAME = re.compile(r"[a-z0-9_-]+(\.[a-z0-9_-]+)*\.?")  # after IDNA: ASCII labels
_NAT64 = ipaddress.ip_network("64:ff9b::/96")  # well-known NAT64 (RFC 6052): judged by its IPv4
# IPv6 beyond the embedding forms above: only global unicast space (RFC 4291, IANA) can be a
# public address. Python's ipaddress (3.11) calls global some blocks that are not, each outside
# it: IPv4-compatible ::/96 (::127.0.0.1), IPv4-translated ::ffff:0:0:0/96, local-use NAT64
# 64:ff9b:1::/48, site-local fec0::/10; and inside it, blocks it does not know are not global:
# documentation 3fff::/20 (RFC 9637, after Python 3.11).
_GLOBAL_UNICAST = ipaddress.ip_network("2000::/3")
_NOT_GLOBAL = (ipaddress.ip_network("3fff::/20"),)


class OutboundRefused(Exception):
    """A URL or an answer that one of the rules refuses. `rule` names the rule (`scheme`,
    `url`, `host`, `credentials`, `port`, `resolve`, `private_host`); the message names at most
    the URL's scheme and host."""

    def __init__(self, message: str, *, rule: str) -> None:
        super().__init__(message)
        self.rule = rule


@dataclass(frozen=True)
class Target:
    scheme: str
    host: str  # ASCII (IDNA) form; an IPv6 literal without brackets
    port: int
    path: str  # the request target: path and query

    @property
    def origin(self) -> str:
        """What error messages may name: the scheme and the host."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}"


def target(uri: str, *, noun: str, schemes: Collection[str] = ("http", "https")) -> Target:
    """The parts of an http(s) URL; OutboundRefused naming the rule it breaks. `noun` says what
    the URL is in the messages ("metadata URI")."""
    try:
        parts = urllib.parse.urlsplit(uri)
        port = parts.port
    except ValueError as exc:  # a bad port, a bad IPv6 literal
        raise OutboundRefused(f"the {noun} is not a valid URL", rule="url") from exc
    scheme = parts.scheme.lower()
    if scheme not in schemes:
        raise OutboundRefused(f"unsupported {noun} scheme {scheme[:16]!r}", rule="scheme")
    try:
        host = (parts.hostname or "").encode("idna").decode("ascii")
    except UnicodeError as exc:
        raise OutboundRefused(f"the {noun}'s host is not a valid host name", rule="host") from exc
    if len(host) > 253 or not (_HOST_NAME.fullmatch(host) or _is_ip_literal(host)):
        raise OutboundRefused(f"the {noun}'s host is not a valid host name", rule="host")
    found = Target(
        scheme=scheme,
        host=host,
        port=port if port is not None else (443 if scheme == "https" else 80),
        # Spaces, control characters and non-ASCII are sent percent-encoded, as browsers do.
        path=urllib.parse.quote(parts.path or "/", safe=string.punctuation)
        + (f"?{urllib.parse.quote(parts.query, safe=string.punctuation)}" if parts.query else ""),
    )
    if parts.username is not None or parts.password is not None:
        raise OutboundRefused(
            f"the {noun} of {found.origin} carries credentials", rule="credentials"
        )
    return found


def _is_ip_literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host.split("%")[0])
    except ValueError:
        return False
    return True


Address = tuple[socket.AddressFamily, tuple[Any, ...]]


# Name resolution within a deadline: getaddrinfo cannot be interrupted, so it runs on one of
# these threads and the caller waits no longer than its deadline. A resolver that hangs holds
# its thread until it returns; once all are held, further resolutions wait in the executor's
# queue and time out at their own deadlines, never past them.
_RESOLVERS = ThreadPoolExecutor(max_workers=32, thread_name_prefix="resolve")


def _resolve(target: Target, deadline: Deadline | None) -> list[Any]:
    if deadline is None or _is_ip_literal(target.host):  # a literal needs no resolver
        return socket.getaddrinfo(target.host, target.port, type=socket.SOCK_STREAM)
    future = _RESOLVERS.submit(
        socket.getaddrinfo, target.host, target.port, type=socket.SOCK_STREAM
    )
    try:
        return future.result(timeout=deadline.remaining())
    except concurrent.futures.TimeoutError:
        future.cancel()
        raise TimeoutError(f"{deadline.what} passed while resolving the host") from None


def pinned_address(
    target: Target, *, noun: str, allow_private: bool, deadline: Deadline | None = None
) -> Address:
    """The one address to connect to: the host is resolved here, once, and refused unless every
    address it resolves to is global (a private one may be what the attacker wants reached).
    `noun` names the host in the messages ("metadata host"). With a `deadline`, a resolver that
    has not answered by then is TimeoutError."""
    try:
        infos = _resolve(target, deadline)
    except (OSError, UnicodeError) as exc:
        if isinstance(exc, TimeoutError):
            raise
        raise OutboundRefused(
            f"the {noun} {target.host!r} does not resolve", rule="resolve"
        ) from exc
    addresses = [
        (family, sockaddr)
        for family, _, _, _, sockaddr in infos
        if family in (socket.AF_INET, socket.AF_INET6)
    ]
    if not addresses:
        raise OutboundRefused(f"the {noun} {target.host!r} does not resolve", rule="resolve")
    if not allow_private and not all(is_public(str(sockaddr[0])) for _, sockaddr in addresses):
        raise OutboundRefused(
            f"the {noun} {target.host!r} is not a public address", rule="private_host"
        )
    return addresses[0]


def is_public(address: str) -> bool:
    """Whether an address is a public one: IPv4 global and not multicast; IPv6 an embedded
    public IPv4 (mapped, well-known NAT64, 6to4), or global unicast (2000::/3) and global."""
    ip = ipaddress.ip_address(address.split("%")[0])  # an IPv6 zone (%eth0) is not an address
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = ip.ipv4_mapped or ip.sixtofour
        if embedded is None and ip in _NAT64:
            embedded = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
        if embedded is not None:
            return is_public(str(embedded))
        if ip not in _GLOBAL_UNICAST or any(ip in block for block in _NOT_GLOBAL):
            return False
    return ip.is_global and not ip.is_multicast


def read_capped(response: http.client.HTTPResponse, cap: int) -> tuple[bytes, bool]:
    """Up to `cap` bytes of the answer's body, and whether there was more."""
    raw = bytearray()
    while chunk := response.read(_CHUNK):
        raw += chunk
        if len(raw) > cap:
            return bytes(raw[:cap]), True
    return bytes(raw), False


class Deadline:
    def __init__(self, seconds: float, *, what: str = "the deadline") -> None:
        self._at = time.monotonic() + seconds
        self.what = what

    def remaining(self) -> float:
        """Seconds left; TimeoutError once there are none."""
        return seconds_left(self._at, what=self.what)


class PinnedConnection(http.client.HTTPConnection):
    """HTTP to the one address that was checked; the Host header still names the host. Kept
    alive for another request (webhooks/sending.py), it is given that request's deadline
    (`renew`) and still goes to the address it was made for."""

    def __init__(self, target: Target, address: Address, deadline: Deadline) -> None:
        super().__init__(target.host, target.port)
        self._address = address
        self._deadline = deadline
        self._socket: socket.socket | None = None

    def renew(self, deadline: Deadline) -> None:
        """The next request's deadline."""
        self._deadline = deadline

    def idle_closed(self) -> bool:
        """Whether a kept-alive connection was closed by its peer (or sent what nobody asked
        for) while idle: it cannot carry another request."""
        if self._socket is None or self.sock is None:
            return True
        try:
            readable, _, _ = select.select([self._socket], [], [], 0)
        except (OSError, ValueError):
            return True
        return bool(readable)

    def connect(self) -> None:
        family, sockaddr = self._address
        self._socket = socket.socket(family, socket.SOCK_STREAM)
        self._socket.settimeout(self._deadline.remaining())
        # http.client writes a request's head and its body in two sends: with Nagle's
        # algorithm the body waits for the head's ACK, which the peer delays (40 ms on Linux)
        # on a kept-alive connection. urllib3 sets the same option on every socket.
        self._socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._socket.connect(sockaddr)  # an address, never a name: no second resolution
        self._socket = self._secure(self._socket)
        self.sock = DeadlineSocket(self._socket, lambda: self._deadline.remaining())

    def _secure(self, sock: socket.socket) -> socket.socket:
        return sock

    def dispose(self) -> None:
        self.close()
        if self._socket is not None:
            self._socket.close()


class PinnedHTTPSConnection(PinnedConnection):
    """HTTPS to the checked address, the certificate verified for the host (SNI names it)."""

    default_port = http.client.HTTPS_PORT

    def _context(self) -> ssl.SSLContext:
        """The TLS context (a subclass may trust certificates of its own)."""
        return tls_context()

    def _secure(self, sock: socket.socket) -> socket.socket:
        sock.settimeout(self._deadline.remaining())
        return self._context().wrap_socket(sock, server_hostname=self.host)


@functools.cache
def tls_context() -> ssl.SSLContext:
    """The system's trusted CAs, certificate and host name checked (Python's defaults)."""
    return ssl.create_default_context()
