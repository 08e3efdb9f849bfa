"""AVS metadata documents: the JSON behind an `AVSMetadataURIUpdated` URI.

The URI comes from the chain, so whoever registered the AVS chooses it: the fetch must not be
a way into internal services, nor a way to hold or crash a worker. The rules:

- `data:` URIs, or `http`/`https` on a port of settings.METADATA_ALLOWED_PORTS, without
  credentials in the URL.
- The host is resolved once; every address must be global (unless
  settings.METADATA_ALLOW_PRIVATE_HOSTS), and the connection goes to the first of those exact
  addresses, so a second DNS answer (rebinding) is never used. The Host header and the TLS
  certificate check still name the host.
- No proxy from the environment, no redirect followed, only a 200 answer served as
  `application/json` or `application/<x>+json`, in UTF-8, at most settings.METADATA_MAX_BYTES
  (declared and read), all within settings.METADATA_FETCH_TIMEOUT seconds from connect to the
  last byte (every socket operation gets what is left of it).
- The document is UTF-8 JSON, nested at most MAX_JSON_NESTING levels, and an object.

Written on http.client rather than requests: requests resolves the host again when it connects
and reads proxies from the environment, and neither its nor urllib3's timeouts bound the whole
exchange.
"""

from __future__ import annotations

import base64
import functools
import http.client
import ipaddress
import json
import re
import socket
import ssl
import string
import time
import urllib.parse
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from core.deadline_io import DeadlineSocket, seconds_left
from core.jsonlimits import MAX_JSON_NESTING, nested_deeper_than

_CHUNK = 8192
_DATA_HEADER_MAX = 200  # "application/vnd.example+json;charset=utf-8;base64" and then some
_HOST_NAME = re.compile(r"[a-z0-9_-]+(\.[a-z0-9_-]+)*\.?")  # after IDNA: ASCII labels
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_HEADERS = {
    "Accept": "application/json",
    "User-Agent": "lat-service-metadata/1",
    "Connection": "close",
}


class MetadataUnavailable(Exception):
    """A metadata document that could not be had. The message names at most the URI's scheme
    and host: it is logged and stored in SyncStatus.last_error."""


def metadata_fetch(uri: str) -> dict[str, Any]:
    """The JSON object behind a `data:`, `http:` or `https:` URI (see the module's rules)."""
    uri = uri.strip()
    raw = _data_uri_bytes(uri) if uri[:5].lower() == "data:" else _http_fetch(uri)
    return _json_object(raw)


def _json_object(raw: bytes) -> dict[str, Any]:
    cap = settings.METADATA_MAX_BYTES
    if len(raw) > cap:
        raise MetadataUnavailable(f"the metadata document is over {cap} bytes")
    if nested_deeper_than(raw, MAX_JSON_NESTING):
        raise MetadataUnavailable(
            f"the metadata document is nested deeper than {MAX_JSON_NESTING} levels"
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MetadataUnavailable("the metadata document is not UTF-8") from exc
    try:
        document = json.loads(text.removeprefix("\ufeff"), parse_constant=_refuse_constant)
    except (ValueError, RecursionError) as exc:
        raise MetadataUnavailable("the metadata document is not JSON") from exc
    if not isinstance(document, dict):
        raise MetadataUnavailable("the metadata document is not a JSON object")
    return document


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _is_json_media_type(media_type: str) -> bool:
    media_type = media_type.strip().lower()
    subtype = media_type.removeprefix("application/")
    return media_type == "application/json" or (
        subtype != media_type and subtype.endswith("+json") and len(subtype) > len("+json")
    )


# --- data: URIs ------------------------------------------------------------------------------


def _data_uri_bytes(uri: str) -> bytes:
    """The bytes of `data:[<media type>][;charset=utf-8][;base64],<data>` (RFC 2397)."""
    cap = settings.METADATA_MAX_BYTES
    header, comma, payload = uri[5:].partition(",")
    if not comma or len(header) > _DATA_HEADER_MAX:
        raise MetadataUnavailable("the metadata data: URI is malformed")
    if len(payload) > 3 * cap:  # percent-encoding at most triples a byte; checked before decoding
        raise MetadataUnavailable(f"the metadata document is over {cap} bytes")
    params = header.split(";")
    is_base64 = len(params) > 1 and params[-1].strip().lower() == "base64"
    if is_base64:
        params.pop()
    media_type, *rest = params
    if media_type.strip() and not _is_json_media_type(media_type):
        raise MetadataUnavailable("the metadata data: URI is not of a JSON media type")
    for param in rest:
        name, _, value = param.partition("=")
        charset = value.strip().strip('"').lower()
        if name.strip().lower() == "charset" and charset != "utf-8":
            raise MetadataUnavailable("the metadata document is not UTF-8")
    data = urllib.parse.unquote_to_bytes(payload)
    if is_base64:
        try:
            data = base64.b64decode(data, validate=True)
        except ValueError as exc:  # binascii.Error
            raise MetadataUnavailable("the metadata data: URI is not valid base64") from exc
    return data


# --- http(s) ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Target:
    scheme: str
    host: str  # ASCII (IDNA) form; an IPv6 literal without brackets
    port: int
    path: str  # the request target: path and query

    @property
    def origin(self) -> str:
        """What error messages may name: the scheme and the host."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}"


def _http_fetch(uri: str) -> bytes:
    deadline = _Deadline(settings.METADATA_FETCH_TIMEOUT)
    target = _target(uri)
    address = _checked_address(target)
    if target.port not in settings.METADATA_ALLOWED_PORTS:
        raise MetadataUnavailable(f"the metadata URI of {target.origin} names a port not allowed")
    connection_class = _PinnedHTTPSConnection if target.scheme == "https" else _PinnedConnection
    try:
        connection = connection_class(target, address, deadline)
    except http.client.InvalidURL as exc:  # control characters in the host
        raise MetadataUnavailable("the metadata URI's host is not a valid host name") from exc
    try:
        connection.request("GET", target.path, headers=_HEADERS)
        response = connection.getresponse()
        _check_response(response, target)
        return _read_capped(response, target)
    except TimeoutError as exc:
        raise MetadataUnavailable(
            f"the metadata document at {target.origin} took longer than "
            f"{settings.METADATA_FETCH_TIMEOUT:g} s"
        ) from exc
    except ssl.SSLCertVerificationError as exc:
        raise MetadataUnavailable(
            f"the TLS certificate of {target.origin} could not be verified"
        ) from exc
    except (OSError, ValueError, http.client.HTTPException) as exc:
        raise MetadataUnavailable(
            f"the metadata document at {target.origin} could not be fetched"
        ) from exc
    finally:
        connection.dispose()


def _target(uri: str) -> _Target:
    try:
        parts = urllib.parse.urlsplit(uri)
        port = parts.port
    except ValueError as exc:  # a bad port, a bad IPv6 literal
        raise MetadataUnavailable("the metadata URI is not a valid URL") from exc
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise MetadataUnavailable(f"unsupported metadata URI scheme {scheme[:16]!r}")
    try:
        host = (parts.hostname or "").encode("idna").decode("ascii")
    except UnicodeError as exc:
        raise MetadataUnavailable("the metadata URI's host is not a valid host name") from exc
    if len(host) > 253 or not (_HOST_NAME.fullmatch(host) or _is_ip_literal(host)):
        raise MetadataUnavailable("the metadata URI's host is not a valid host name")
    target = _Target(
        scheme=scheme,
        host=host,
        port=port if port is not None else (443 if scheme == "https" else 80),
        # Spaces, control characters and non-ASCII are sent percent-encoded, as browsers do.
        path=urllib.parse.quote(parts.path or "/", safe=string.punctuation)
        + (f"?{urllib.parse.quote(parts.query, safe=string.punctuation)}" if parts.query else ""),
    )
    if parts.username is not None or parts.password is not None:
        raise MetadataUnavailable(f"the metadata URI of {target.origin} carries credentials")
    return target


def _is_ip_literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host.split("%")[0])
    except ValueError:
        return False
    return True


_Address = tuple[socket.AddressFamily, tuple[Any, ...]]


def _checked_address(target: _Target) -> _Address:
    """The one address to connect to: the host is resolved here, once, and refused unless every
    address it resolves to is global (a private one may be what the attacker wants reached)."""
    try:
        infos = socket.getaddrinfo(target.host, target.port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise MetadataUnavailable(f"the metadata host {target.host!r} does not resolve") from exc
    addresses = [
        (family, sockaddr)
        for family, _, _, _, sockaddr in infos
        if family in (socket.AF_INET, socket.AF_INET6)
    ]
    if not addresses:
        raise MetadataUnavailable(f"the metadata host {target.host!r} does not resolve")
    if not settings.METADATA_ALLOW_PRIVATE_HOSTS and not all(
        _is_public(str(sockaddr[0])) for _, sockaddr in addresses
    ):
        raise MetadataUnavailable(f"the metadata host {target.host!r} is not a public address")
    return addresses[0]


def _is_public(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%")[0])  # an IPv6 zone (%eth0) is not an address
    if not ip.is_global or ip.is_multicast:
        return False
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = ip.ipv4_mapped or ip.sixtofour
        if embedded is None and ip in _NAT64:
            embedded = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
        if embedded is not None:
            return _is_public(str(embedded))
    return True


def _check_response(response: http.client.HTTPResponse, target: _Target) -> None:
    where = target.origin
    if 300 <= response.status < 400:
        raise MetadataUnavailable(f"the metadata document at {where} redirects elsewhere")
    if response.status != 200:
        raise MetadataUnavailable(
            f"the metadata document at {where} answered HTTP {response.status}"
        )
    if not _is_json_media_type(response.headers.get_content_type()):
        raise MetadataUnavailable(f"the metadata document at {where} is not served as JSON")
    if response.headers.get_content_charset("utf-8") != "utf-8":
        raise MetadataUnavailable(f"the metadata document at {where} is not UTF-8")
    if (response.getheader("Content-Encoding") or "identity").strip().lower() != "identity":
        raise MetadataUnavailable(f"the metadata document at {where} is served compressed")
    cap = settings.METADATA_MAX_BYTES
    if response.length is not None and response.length > cap:  # the declared Content-Length
        raise MetadataUnavailable(f"the metadata document at {where} is over {cap} bytes")


def _read_capped(response: http.client.HTTPResponse, target: _Target) -> bytes:
    cap = settings.METADATA_MAX_BYTES
    raw = bytearray()
    while chunk := response.read(_CHUNK):
        raw += chunk
        if len(raw) > cap:
            raise MetadataUnavailable(
                f"the metadata document at {target.origin} is over {cap} bytes"
            )
    return bytes(raw)


class _Deadline:
    def __init__(self, seconds: float) -> None:
        self._at = time.monotonic() + seconds

    def remaining(self) -> float:
        """Seconds left; TimeoutError once there are none."""
        return seconds_left(self._at, what="the metadata fetch deadline")


class _PinnedConnection(http.client.HTTPConnection):
    """HTTP to the one address that was checked; the Host header still names the host."""

    def __init__(self, target: _Target, address: _Address, deadline: _Deadline) -> None:
        super().__init__(target.host, target.port)
        self._address = address
        self._deadline = deadline
        self._socket: socket.socket | None = None

    def connect(self) -> None:
        family, sockaddr = self._address
        self._socket = socket.socket(family, socket.SOCK_STREAM)
        self._socket.settimeout(self._deadline.remaining())
        self._socket.connect(sockaddr)  # an address, never a name: no second resolution
        self._socket = self._secure(self._socket)
        self.sock = DeadlineSocket(self._socket, self._deadline.remaining)

    def _secure(self, sock: socket.socket) -> socket.socket:
        return sock

    def dispose(self) -> None:
        self.close()
        if self._socket is not None:
            self._socket.close()


class _PinnedHTTPSConnection(_PinnedConnection):
    """HTTPS to the checked address, the certificate verified for the host (SNI names it)."""

    default_port = http.client.HTTPS_PORT

    def _secure(self, sock: socket.socket) -> socket.socket:
        sock.settimeout(self._deadline.remaining())
        return _tls_context().wrap_socket(sock, server_hostname=self.host)


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """The system's trusted CAs, certificate and host name checked (Python's defaults)."""
    return ssl.create_default_context()
