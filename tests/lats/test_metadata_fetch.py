"""The hardened AVS metadata fetch (lats.metadata), against real HTTP servers on loopback.

Only the resolver is faked, and only where a test needs DNS answers that cannot be had offline
(a public address, an answer that changes between two lookups: DNS rebinding).
"""

from __future__ import annotations

import base64
import json
import shutil
import socket
import ssl
import subprocess
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from core import outbound
from core.jsonlimits import MAX_JSON_NESTING, nested_deeper_than
from lats import metadata
from lats.metadata import MetadataUnavailable, metadata_fetch
from tests.resolver import FakeResolver

pytestmark = pytest.mark.django_db

DOCUMENT = {"name": "Café AVS ✓", "website": "https://avs.example", "tags": ["a", {"b": None}]}
PUBLIC = "93.184.215.14"  # a global address (example.com's); never connected to here

Respond = Callable[[BaseHTTPRequestHandler], None]


@dataclass
class Server:
    port: int
    hits: list[tuple[str, str | None]] = field(default_factory=list)  # (path, Host header)


def answer(
    body: bytes,
    content_type: str | None = "application/json",
    *,
    status: int = 200,
    length: bool = True,
    headers: tuple[tuple[str, str], ...] = (),
) -> Respond:
    def respond(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(status)
        if content_type is not None:
            handler.send_header("Content-Type", content_type)
        if length:
            handler.send_header("Content-Length", str(len(body)))
        for name, value in headers:
            handler.send_header(name, value)
        handler.send_header("Connection", "close")
        handler.end_headers()
        handler.wfile.write(body)

    return respond


@pytest.fixture
def serve(settings: Any) -> Iterator[Callable[..., Server]]:
    """Start a threaded HTTP server; its port is allowed unless `allow=False`."""
    settings.METADATA_ALLOW_PRIVATE_HOSTS = True
    servers: list[ThreadingHTTPServer] = []

    def start(
        respond: Respond,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        allow: bool = True,
        tls: ssl.SSLContext | None = None,
    ) -> Server:
        server = Server(port=0)

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def parse_request(self) -> bool:
                ok = super().parse_request()
                server.hits.append((self.path, self.headers.get("Host") if ok else None))
                return ok

            def do_GET(self) -> None:
                try:
                    respond(self)
                except OSError:  # the client gave up
                    self.close_connection = True

            def log_message(self, format: str, *args: Any) -> None:
                pass

        httpd = ThreadingHTTPServer((host, port), Handler)
        if tls is not None:
            httpd.socket = tls.wrap_socket(httpd.socket, server_side=True)
        threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True).start()
        servers.append(httpd)
        server.port = httpd.server_port
        if allow:
            settings.METADATA_ALLOWED_PORTS = [*settings.METADATA_ALLOWED_PORTS, server.port]
        return server

    yield start
    for httpd in servers:
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture
def resolver(monkeypatch: pytest.MonkeyPatch) -> FakeResolver:
    fake = FakeResolver()
    monkeypatch.setattr(socket, "getaddrinfo", fake)
    return fake


def document_bytes(document: Any = DOCUMENT) -> bytes:
    return json.dumps(document, ensure_ascii=False).encode()


# --- a good document -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "content_type",
    [
        "application/json",
        "application/json; charset=utf-8",
        "Application/JSON;Charset=UTF-8",
        "application/vnd.eigenlayer.avs+json",
    ],
)
def test_good_document_is_returned_exactly(serve, content_type):
    server = serve(answer(document_bytes(), content_type))
    uri = f"http://127.0.0.1:{server.port}/avs/meta.json?v=1"
    assert metadata_fetch(uri) == DOCUMENT
    assert server.hits == [("/avs/meta.json?v=1", f"127.0.0.1:{server.port}")]


def test_chunked_document_without_length(serve):
    def chunked(handler: BaseHTTPRequestHandler) -> None:
        body = document_bytes()
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        for part in (body[:10], body[10:]):
            handler.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
        handler.wfile.write(b"0\r\n\r\n")

    server = serve(chunked)
    assert metadata_fetch(f"http://127.0.0.1:{server.port}/") == DOCUMENT


# --- what is refused before connecting -------------------------------------------------------


def test_port_not_allowed_is_refused_before_connecting(serve):
    server = serve(answer(document_bytes()), allow=False)
    with pytest.raises(MetadataUnavailable, match="names a port not allowed"):
        metadata_fetch(f"http://127.0.0.1:{server.port}/meta.json")
    assert server.hits == []
    with pytest.raises(MetadataUnavailable, match="names a port not allowed"):
        metadata_fetch("http://127.0.0.1:8080/meta.json")


@pytest.mark.parametrize(
    ("uri", "message"),
    [
        ("ftp://127.0.0.1/meta.json", "unsupported metadata URI scheme 'ftp'"),
        ("file:///etc/passwd", "unsupported metadata URI scheme 'file'"),
        ("gopher://127.0.0.1:70/_x", "unsupported metadata URI scheme 'gopher'"),
        ("http://user:secret@127.0.0.1/x", "the metadata URI of http://127.0.0.1 carries creden"),
        ("http://:secret@127.0.0.1/x", "the metadata URI of http://127.0.0.1 carries creden"),
        ("http://127.0.0.1:99999/x", "the metadata URI is not a valid URL"),
        ("http:///x", "the metadata URI's host is not a valid host name"),
        ("http://exa mple.example/x", "the metadata URI's host is not a valid host name"),
        ("http://a\x01b.example/x", "the metadata URI's host is not a valid host name"),
        ("http://a..b.example/x", "the metadata URI's host is not a valid host name"),
    ],
)
def test_bad_urls_are_refused(settings, uri, message):
    settings.METADATA_ALLOW_PRIVATE_HOSTS = True
    with pytest.raises(MetadataUnavailable) as caught:
        metadata_fetch(uri)
    assert str(caught.value).startswith(message)
    assert "secret" not in str(caught.value)


@pytest.mark.parametrize(
    "addresses",
    [
        ["127.0.0.1"],
        ["10.0.0.5"],
        [PUBLIC, "192.168.1.1"],  # every address must be public, not just one
        ["169.254.169.254"],
        ["100.64.0.1"],
        ["::1"],
        ["fe80::1%eth0"],
        ["::ffff:127.0.0.1"],
        ["64:ff9b::a00:1"],  # NAT64 of 10.0.0.1
        ["2002:a00:1::1"],  # 6to4 of 10.0.0.1
        ["224.0.0.1"],
        ["::127.0.0.1"],  # IPv4-compatible (deprecated, RFC 4291)
        ["::ffff:0:127.0.0.1"],  # IPv4-translated (SIIT, RFC 2765)
        ["64:ff9b:1::a00:1"],  # local-use NAT64 (RFC 8215)
        ["64:ff9b:1::808:808"],  # the same prefix: not a public route, whatever follows
        ["fec0::1"],  # site-local (deprecated, RFC 3879)
        ["3fff::1"],  # documentation (RFC 9637)
    ],
)
def test_host_resolving_to_a_private_address_is_refused(settings, resolver, addresses):
    settings.METADATA_ALLOW_PRIVATE_HOSTS = False
    resolver.answers["avs.example"] = [addresses]
    with pytest.raises(MetadataUnavailable) as caught:
        metadata_fetch("https://avs.example/meta.json")
    assert str(caught.value) == "the metadata host 'avs.example' is not a public address"


@pytest.mark.parametrize(
    "address",
    [
        "8.8.8.8",
        "2606:4700:4700::1111",  # global unicast
        "::ffff:8.8.8.8",  # IPv4-mapped, of a public address
        "64:ff9b::808:808",  # the well-known NAT64 prefix, of a public address
        "2002:808:808::1",  # 6to4 of a public address
    ],
)
def test_public_addresses_in_each_form_are_public(address):
    assert outbound.is_public(address)


def test_loopback_server_is_not_reached_when_private_hosts_are_refused(serve, settings):
    server = serve(answer(document_bytes()))
    settings.METADATA_ALLOW_PRIVATE_HOSTS = False
    for host in ("127.0.0.1", "localhost"):
        with pytest.raises(MetadataUnavailable, match="is not a public address"):
            metadata_fetch(f"http://{host}:{server.port}/")
    assert server.hits == []


# --- DNS rebinding -----------------------------------------------------------------------------


def test_rebinding_answer_is_never_used(serve, resolver, settings, monkeypatch):
    """The first answer (public) is checked; the second (loopback) would reach the local
    server. The connection goes to the checked address and the name is looked up once."""
    settings.METADATA_ALLOW_PRIVATE_HOSTS = False
    settings.METADATA_FETCH_TIMEOUT = 1
    local = serve(answer(document_bytes()))
    resolver.answers["rebind.example"] = [[PUBLIC], ["127.0.0.1"]]
    connected: list[tuple[Any, ...]] = []

    def connect(self: Any) -> None:  # offline: record where it would connect, then fail
        connected.append(self._address)
        raise ConnectionRefusedError

    monkeypatch.setattr(metadata._PinnedConnection, "connect", connect)
    with pytest.raises(MetadataUnavailable) as caught:
        metadata_fetch(f"http://rebind.example:{local.port}/meta.json")
    assert str(caught.value) == (
        "the metadata document at http://rebind.example could not be fetched"
    )
    assert connected == [(socket.AF_INET, (PUBLIC, local.port))]
    assert resolver.calls == ["rebind.example"]
    assert local.hits == []


def test_rebinding_end_to_end_reaches_only_the_checked_address(serve, resolver):
    """The same with real connections: 127.0.0.1 stands for the checked address, 127.0.0.2
    (same port) for the address a second lookup would give."""
    checked = serve(answer(document_bytes()), host="127.0.0.1")
    try:
        rebound = serve(answer(b'{"name": "rebound"}'), host="127.0.0.2", port=checked.port)
    except OSError:
        pytest.skip("127.0.0.2 cannot be bound here")
    resolver.answers["rebind.example"] = [["127.0.0.1"], ["127.0.0.2"]]
    assert metadata_fetch(f"http://rebind.example:{checked.port}/m.json") == DOCUMENT
    assert checked.hits == [("/m.json", f"rebind.example:{checked.port}")]
    assert rebound.hits == []
    assert resolver.calls == ["rebind.example"]


# --- what the server answers -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("content_type", "message"),
    [
        ("text/html", "is not served as JSON"),
        ("text/plain", "is not served as JSON"),
        (None, "is not served as JSON"),
        ("application/javascript", "is not served as JSON"),
        ("application/jsonx", "is not served as JSON"),
        ("application/+json", "is not served as JSON"),
        ("text/json+json", "is not served as JSON"),
        ("application/json; charset=iso-8859-1", "is not UTF-8"),
        ("application/json; charset=utf-16", "is not UTF-8"),
    ],
)
def test_non_json_content_types_are_refused(serve, content_type, message):
    server = serve(answer(document_bytes(), content_type))
    with pytest.raises(MetadataUnavailable) as caught:
        metadata_fetch(f"http://127.0.0.1:{server.port}/")
    assert str(caught.value) == f"the metadata document at http://127.0.0.1 {message}"


def test_redirect_is_not_followed(serve):
    holder: dict[str, int] = {}

    def redirect_or_serve(handler: BaseHTTPRequestHandler) -> None:
        if handler.path == "/moved":
            location = f"http://127.0.0.1:{holder['port']}/meta.json"
            answer(b"", None, status=302, headers=(("Location", location),))(handler)
        else:
            answer(document_bytes())(handler)

    server = serve(redirect_or_serve)
    holder["port"] = server.port
    with pytest.raises(MetadataUnavailable, match="redirects elsewhere"):
        metadata_fetch(f"http://127.0.0.1:{server.port}/moved")
    assert [path for path, _ in server.hits] == ["/moved"]


def test_error_status_is_refused_without_path_or_query_in_the_message(serve):
    server = serve(answer(b"{}", status=404))
    with pytest.raises(MetadataUnavailable) as caught:
        metadata_fetch(f"http://127.0.0.1:{server.port}/private/path?token=abc123")
    assert str(caught.value) == "the metadata document at http://127.0.0.1 answered HTTP 404"


def test_compressed_document_is_refused(serve):
    server = serve(answer(document_bytes(), headers=(("Content-Encoding", "gzip"),)))
    with pytest.raises(MetadataUnavailable, match="served compressed"):
        metadata_fetch(f"http://127.0.0.1:{server.port}/")


@pytest.mark.parametrize("length", [True, False])
def test_document_over_the_size_cap_is_refused(serve, settings, length):
    settings.METADATA_MAX_BYTES = 1000
    body = document_bytes({"name": "x" * 1200})
    server = serve(answer(body, length=length))
    with pytest.raises(MetadataUnavailable) as caught:
        metadata_fetch(f"http://127.0.0.1:{server.port}/")
    assert str(caught.value) == "the metadata document at http://127.0.0.1 is over 1000 bytes"


def test_declared_length_over_the_cap_is_refused_before_reading(serve, settings):
    """Content-Length of 1 GB and no body at all: refused at once, not after a read timeout."""
    settings.METADATA_FETCH_TIMEOUT = 5

    def huge(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(10**9))
        handler.end_headers()
        time.sleep(3)

    server = serve(huge)
    started = time.monotonic()
    with pytest.raises(MetadataUnavailable, match="is over 65536 bytes"):
        metadata_fetch(f"http://127.0.0.1:{server.port}/")
    assert time.monotonic() - started < 1


@pytest.mark.parametrize("depth", [MAX_JSON_NESTING + 1, 100_000])
def test_deeply_nested_document_is_refused(serve, settings, depth):
    settings.METADATA_MAX_BYTES = 300_000
    body = b'{"a":' + b"[" * (depth - 1) + b"]" * (depth - 1) + b"}"
    server = serve(answer(body))
    with pytest.raises(MetadataUnavailable) as caught:
        metadata_fetch(f"http://127.0.0.1:{server.port}/")
    assert str(caught.value) == "the metadata document is nested deeper than 32 levels"


def test_nesting_at_the_limit_is_accepted(serve):
    body = b'{"a":' + b"[" * (MAX_JSON_NESTING - 1) + b"]" * (MAX_JSON_NESTING - 1) + b"}"
    server = serve(answer(body))
    document = metadata_fetch(f"http://127.0.0.1:{server.port}/")
    inner = document["a"]
    for _ in range(MAX_JSON_NESTING - 2):
        inner = inner[0]
    assert inner == []


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ('{"name": "Café"}'.encode("latin-1"), "the metadata document is not UTF-8"),
        ('{"name": "Café"}'.encode("utf-16"), "the metadata document is not UTF-8"),
        ('{"name": "AVS"}'.encode("utf-16-le"), "the metadata document is not JSON"),
        (b'{"name": NaN}', "the metadata document is not JSON"),
        (b'["name"]', "the metadata document is not a JSON object"),
    ],
)
def test_documents_not_utf8_json_objects_are_refused(serve, body, message):
    server = serve(answer(body))
    with pytest.raises(MetadataUnavailable) as caught:
        metadata_fetch(f"http://127.0.0.1:{server.port}/")
    assert str(caught.value) == message


def test_utf8_byte_order_mark_is_accepted(serve):
    server = serve(answer(b"\xef\xbb\xbf" + document_bytes()))
    assert metadata_fetch(f"http://127.0.0.1:{server.port}/") == DOCUMENT


# --- the deadline ----------------------------------------------------------------------------


def trickle_body(handler: BaseHTTPRequestHandler) -> None:
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", "40")
    handler.end_headers()
    handler.wfile.write(b'{"name": "')
    for _ in range(30):
        time.sleep(0.3)
        handler.wfile.write(b"x")


def trickle_headers(handler: BaseHTTPRequestHandler) -> None:
    handler.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Slow: ")
    for _ in range(30):
        time.sleep(0.3)
        handler.wfile.write(b"x")


@pytest.mark.parametrize("respond", [trickle_body, trickle_headers])
def test_trickling_server_is_given_up_on_at_the_deadline(serve, settings, respond):
    settings.METADATA_FETCH_TIMEOUT = 1
    server = serve(respond)
    started = time.monotonic()
    with pytest.raises(MetadataUnavailable) as caught:
        metadata_fetch(f"http://127.0.0.1:{server.port}/")
    elapsed = time.monotonic() - started
    assert str(caught.value) == "the metadata document at http://127.0.0.1 took longer than 1 s"
    assert 0.9 < elapsed < 1.5


# --- proxies -----------------------------------------------------------------------------------


def test_proxy_from_the_environment_is_ignored(serve, monkeypatch):
    proxy = serve(answer(b'{"name": "proxied"}'))
    origin = serve(answer(document_bytes()))
    for name in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY"):
        monkeypatch.setenv(name, f"http://127.0.0.1:{proxy.port}")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    assert metadata_fetch(f"http://127.0.0.1:{origin.port}/meta.json") == DOCUMENT
    assert proxy.hits == []
    assert len(origin.hits) == 1


# --- https: the checked address, the certificate checked for the host name --------------------


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for metadata.example, made with the openssl command."""
    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl command")
    directory = tmp_path_factory.mktemp("tls")
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "1",
         "-subj", "/CN=metadata.example", "-addext", "subjectAltName=DNS:metadata.example"],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return cert, key


@pytest.fixture
def tls_server(serve, resolver, certificate, monkeypatch) -> tuple[Server, list[str]]:
    """An HTTPS server on 127.0.0.1 for the names metadata.example and other.example; the
    fetch trusts its certificate. Returns the server and the SNI names it was sent."""
    cert, key = certificate
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_context.load_cert_chain(cert, key)
    names: list[str] = []

    def record_name(_sock: ssl.SSLObject, name: str | None, _context: ssl.SSLContext) -> None:
        names.append(name or "")

    server_context.sni_callback = record_name
    client_context = ssl.create_default_context(cafile=str(cert))
    monkeypatch.setattr(metadata, "_tls_context", lambda: client_context)
    server = serve(answer(document_bytes()), tls=server_context)
    resolver.answers["metadata.example"] = [["127.0.0.1"]]
    resolver.answers["other.example"] = [["127.0.0.1"]]
    return server, names


def test_https_connects_to_the_checked_address_with_the_host_name(tls_server):
    server, names = tls_server
    assert metadata_fetch(f"https://metadata.example:{server.port}/m.json") == DOCUMENT
    assert server.hits == [("/m.json", f"metadata.example:{server.port}")]
    assert names == ["metadata.example"]


def test_https_certificate_for_another_name_is_refused(tls_server):
    server, names = tls_server
    with pytest.raises(MetadataUnavailable) as caught:
        metadata_fetch(f"https://other.example:{server.port}/m.json")
    assert str(caught.value) == "the TLS certificate of https://other.example could not be verified"
    assert server.hits == []
    assert names == ["other.example"]


def test_https_untrusted_certificate_is_refused(tls_server, monkeypatch):
    server, _ = tls_server
    monkeypatch.setattr(metadata, "_tls_context", ssl.create_default_context)
    with pytest.raises(MetadataUnavailable) as caught:
        metadata_fetch(f"https://metadata.example:{server.port}/m.json")
    assert str(caught.value) == (
        "the TLS certificate of https://metadata.example could not be verified"
    )
    assert server.hits == []


# --- data: URIs --------------------------------------------------------------------------------


def base64_uri(raw: bytes, header: str = "application/json") -> str:
    return f"data:{header};base64,{base64.b64encode(raw).decode()}"


def percent_uri(raw: bytes, header: str = "application/json") -> str:
    return f"data:{header},{urllib.parse.quote_from_bytes(raw)}"


@pytest.mark.parametrize(
    "uri",
    [
        base64_uri(document_bytes()),
        base64_uri(document_bytes(), "application/json;charset=UTF-8"),
        base64_uri(document_bytes(), ""),
        percent_uri(document_bytes()),
        percent_uri(document_bytes(), "application/vnd.avs+json"),
        percent_uri(document_bytes(), ""),
        "data:application/json;base64,"
        + urllib.parse.quote(base64.b64encode(document_bytes()).decode(), safe=""),
    ],
)
def test_data_uri_documents(uri):
    assert metadata_fetch(uri) == DOCUMENT


@pytest.mark.parametrize(
    ("uri", "message"),
    [
        (base64_uri(document_bytes({"a": "x" * 2000})), "the metadata document is over 1000"),
        (percent_uri(document_bytes({"a": "x" * 2000})), "the metadata document is over 1000"),
        ("data:application/json," + "%41" * 1001, "the metadata document is over 1000"),
        ("data:application/json," + "x" * 3001, "the metadata document is over 1000"),
        (base64_uri(document_bytes(), "text/plain"), "the metadata data: URI is not of a JSON"),
        (percent_uri(document_bytes(), "text/html"), "the metadata data: URI is not of a JSON"),
        (percent_uri(document_bytes(), "application/json;charset=latin-1"), "is not UTF-8"),
        (base64_uri(b'{"a":' + b"[" * 40 + b"]" * 40 + b"}"), "is nested deeper than 32"),
        (percent_uri(b'{"a":' + b"[" * 40 + b"]" * 40 + b"}"), "is nested deeper than 32"),
        ('data:application/json,{"name":"Caf%E9"}', "the metadata document is not UTF-8"),
        ("data:application/json;base64,e30=!", "the metadata data: URI is not valid base64"),
        ("data:application/json;base64", "the metadata data: URI is malformed"),
        (percent_uri(b"[1, 2]"), "the metadata document is not a JSON object"),
    ],
)
def test_bad_data_uris_are_refused(settings, uri, message):
    settings.METADATA_MAX_BYTES = 1000
    with pytest.raises(MetadataUnavailable) as caught:
        metadata_fetch(uri)
    assert message in str(caught.value)


# --- the shared nesting guard ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "deeper"),
    [
        (b"[" * 3 + b"]" * 3, False),
        (b"[" * 4 + b"]" * 4, True),
        (b'["[[[[[[", {"a": "{{{{"}]', False),  # brackets inside strings do not count
        (b'["\\"[[[[", [[[]]]]', True),  # an escaped quote does not end the string
    ],
)
def test_nested_deeper_than(raw, deeper):
    assert nested_deeper_than(raw, 3) is deeper
