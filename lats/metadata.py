"""AVS metadata documents: the JSON behind an `AVSMetadataURIUpdated` URI.

The URI comes from the chain, so whoever registered the AVS chooses it: the fetch must not be
a way into internal services, nor a way to hold or crash a worker. The rules (those of http(s)
shared with the webhook deliveries in core/outbound.py):

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
"""

from __future__ import annotations

import base64
import http.client
import json
import ssl
import urllib.parse
from typing import Any

from django.conf import settings

from core import outbound
from core.jsonlimits import MAX_JSON_NESTING, nested_deeper_than

_DATA_HEADER_MAX = 200  # "application/vnd.example+json;charset=utf-8;base64" and then some
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

# The shared rules of outbound HTTP (core/outbound.py), under the names this module had.
_Target = outbound.Target
_PinnedConnection = outbound.PinnedConnection


class _PinnedHTTPSConnection(outbound.PinnedHTTPSConnection):
    def _context(self) -> ssl.SSLContext:
        return _tls_context()


def _tls_context() -> ssl.SSLContext:
    return outbound.tls_context()


def _http_fetch(uri: str) -> bytes:
    deadline = outbound.Deadline(
        settings.METADATA_FETCH_TIMEOUT, what="the metadata fetch deadline"
    )
    try:
        target = outbound.target(uri, noun="metadata URI")
        address = outbound.pinned_address(
            target,
            noun="metadata host",
            allow_private=settings.METADATA_ALLOW_PRIVATE_HOSTS,
            deadline=deadline,
        )
    except outbound.OutboundRefused as exc:
        raise MetadataUnavailable(str(exc)) from exc
    except TimeoutError as exc:  # the name did not resolve within the deadline
        raise MetadataUnavailable(
            f"the metadata host {target.host!r} did not resolve within "
            f"{settings.METADATA_FETCH_TIMEOUT:g} s"
        ) from exc
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
    raw, more = outbound.read_capped(response, cap)
    if more:
        raise MetadataUnavailable(f"the metadata document at {target.origin} is over {cap} bytes")
    return raw
