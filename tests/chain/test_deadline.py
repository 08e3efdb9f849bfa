"""chain/deadline.py: JSON-RPC batches over HTTP within a total deadline, on kept-alive
connections, in the caller's thread.

anvil answers the real batches (expected values read with plain web3). The faults anvil cannot
be made to produce are small servers of the test's own: one that trickles its answer, one that
closes idle connections, answers HTTP errors, garbage or a batch out of order, a proxy. Only a
resolver that hangs is a fake (socket.getaddrinfo made to wait): no real resolver can be made
to hang from a test.
"""

from __future__ import annotations

import base64
import http.server
import json
import socket
import socketserver
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from prometheus_client import REGISTRY

from chain.deadline import DeadlineClient
from chain.errors import ChainUnavailable
from chain.transport import error_kind
from devchain.anvil import AnvilNode, start_anvil
from devchain.devnet import connect
from tests.ports import closed_port_url
from tests.trickling import TricklingServer

CHAIN_ID = 31337  # anvil's default, which start_anvil passes on its command line


@pytest.fixture(scope="module")
def anvil() -> Iterator[AnvilNode]:
    node = start_anvil(reuse=False)
    yield node
    node.stop()


def within(seconds: float) -> float:
    return time.monotonic() + seconds


class _Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


class Node:
    """An HTTP/1.1 server on 127.0.0.1 that keeps connections alive (closing one idle for
    `idle_timeout` s): `answer(batch)` gives (status, body) for each request. Every request is
    kept as (client port, request line, headers, body)."""

    def __init__(
        self,
        answer: Callable[[Any], tuple[int, bytes]],
        *,
        idle_timeout: float | None = None,
    ) -> None:
        self.requests: list[tuple[int, str, dict[str, str], bytes]] = []
        node = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            timeout = idle_timeout

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                line = self.requestline
                node.requests.append((self.client_address[1], line, dict(self.headers), body))
                status, reply = answer(json.loads(body))
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = _Server(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def peers(self) -> list[int]:
        return [port for port, _, _, _ in self.requests]

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def results(batch: list[dict[str, Any]], values: list[Any]) -> bytes:
    return json.dumps(
        [{"jsonrpc": "2.0", "id": r["id"], "result": v} for r, v in zip(batch, values, strict=True)]
    ).encode()


def chain_id_answer(batch: list[dict[str, Any]]) -> tuple[int, bytes]:
    return 200, results(batch, [hex(CHAIN_ID)] * len(batch))


@pytest.fixture
def node() -> Iterator[Node]:
    server = Node(chain_id_answer, idle_timeout=0.3)
    yield server
    server.stop()


def rpc_sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


# --- answers --------------------------------------------------------------------------------------


def test_a_batch_on_anvil_answers_what_web3_reads(anvil):
    client = DeadlineClient(anvil.url, chain=str(CHAIN_ID))
    bad_block = ("eth_getBlockByNumber", ["not a block", False])
    chain_id, price, refused = client.batch(
        [("eth_chainId", []), ("eth_gasPrice", []), bad_block], deadline=within(5)
    )
    assert int(chain_id, 16) == CHAIN_ID
    assert int(price, 16) == connect(anvil.url).eth.gas_price
    # One request's JSON-RPC error is that item's, as Transport.batch gives it.
    assert isinstance(refused, ChainUnavailable)
    assert refused.refused


def test_answers_are_put_back_in_request_order():
    def reversed_answer(batch: list[dict[str, Any]]) -> tuple[int, bytes]:
        return 200, results(batch[::-1], [hex(r["id"] + 10) for r in batch[::-1]])

    server = Node(reversed_answer)
    try:
        client = DeadlineClient(server.url)
        calls = [("eth_chainId", []), ("eth_gasPrice", []), ("eth_blockNumber", [])]
        assert client.batch(calls, deadline=within(5)) == ["0xa", "0xb", "0xc"]
    finally:
        server.stop()


def test_rpc_metrics_count_each_request_of_the_batch(node):
    chain = "deadline-metrics"
    before = rpc_sample("lat_rpc_requests_total", chain=chain, method="eth_chainId")
    timed = rpc_sample("lat_rpc_duration_seconds_count", chain=chain, method="batch")
    DeadlineClient(node.url, chain=chain).batch([("eth_chainId", [])] * 2, deadline=within(5))
    assert rpc_sample("lat_rpc_requests_total", chain=chain, method="eth_chainId") == before + 2
    assert rpc_sample("lat_rpc_duration_seconds_count", chain=chain, method="batch") == timed + 1


# --- kept-alive connections ---------------------------------------------------------------------


def test_one_connection_carries_every_batch_and_a_closed_one_is_replaced(node):
    client = DeadlineClient(node.url)
    for _ in range(3):
        assert client.batch([("eth_chainId", [])], deadline=within(5)) == [hex(CHAIN_ID)]
    assert len(node.peers) == 3
    assert len(set(node.peers)) == 1  # one TCP connection (one client port) for all three
    time.sleep(0.6)  # the server closes it after 0.3 s idle
    assert client.batch([("eth_chainId", [])], deadline=within(5)) == [hex(CHAIN_ID)]
    assert len(set(node.peers)) == 2
    client.close()


def test_the_request_leaves_in_one_write():
    """Headers and body in one write: the node reads the whole request at its first read."""
    server = socket.create_server(("127.0.0.1", 0))
    first_reads: list[bytes] = []

    def serve() -> None:
        conn, _ = server.accept()
        with conn:
            first_reads.append(conn.recv(65536))
            reply = json.dumps([{"jsonrpc": "2.0", "id": 0, "result": "0x1"}]).encode()
            head = f"HTTP/1.1 200 OK\r\nContent-Length: {len(reply)}\r\n\r\n".encode()
            conn.sendall(head + reply)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        client = DeadlineClient(f"http://127.0.0.1:{server.getsockname()[1]}")
        assert client.batch([("eth_chainId", [])], deadline=within(5)) == ["0x1"]
        thread.join(5)
    finally:
        server.close()
    head, _, body = first_reads[0].partition(b"\r\n\r\n")
    assert head.startswith(b"POST / HTTP/1.1\r\n")
    assert json.loads(body) == [{"jsonrpc": "2.0", "method": "eth_chainId", "params": [], "id": 0}]


def test_concurrent_callers_each_get_a_connection(node):
    client = DeadlineClient(node.url)
    answers: list[Any] = []
    barrier = threading.Barrier(4)

    def call() -> None:
        barrier.wait()
        answers.append(client.batch([("eth_chainId", [])], deadline=within(5)))

    threads = [threading.Thread(target=call) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert answers == [[hex(CHAIN_ID)]] * 4
    client.close()


# --- the deadline --------------------------------------------------------------------------------


def trickler() -> TricklingServer:
    """Accepts, reads the request, then sends a status line one byte every 50 ms: each read
    succeeds well within any per-read timeout, the answer never completes in the test."""
    return TricklingServer(b"HTTP/1.1 200 OK\r\nX-Padding: " + b"a" * 10_000, interval=0.05)


def test_an_answer_trickled_a_byte_at_a_time_is_cut_at_the_deadline():
    node = trickler()
    chain = "deadline-trickle"
    before = rpc_sample("lat_rpc_errors_total", chain=chain, method="eth_chainId", kind="timeout")
    try:
        client = DeadlineClient(node.url, chain=chain)
        started = time.monotonic()
        with pytest.raises(ChainUnavailable) as raised:
            client.batch([("eth_chainId", [])], deadline=started + 0.5)
        elapsed = time.monotonic() - started
    finally:
        node.stop()
    assert 0.5 <= elapsed < 0.8
    assert isinstance(raised.value.__cause__, TimeoutError)
    assert error_kind(raised.value) == "timeout"
    errors = rpc_sample("lat_rpc_errors_total", chain=chain, method="eth_chainId", kind="timeout")
    assert errors == before + 1


def test_a_refused_connection_fails_at_once():
    client = DeadlineClient(closed_port_url())
    started = time.monotonic()
    with pytest.raises(ChainUnavailable, match="could not be reached") as raised:
        client.batch([("eth_chainId", [])], deadline=started + 5)
    assert time.monotonic() - started < 1
    assert error_kind(raised.value) == "unreachable"


def test_a_hanging_resolver_is_given_up_at_the_deadline(node, monkeypatch):
    resolve = socket.getaddrinfo
    release = threading.Event()
    resolved = threading.Event()

    def hanging(*args: Any, **kwargs: Any) -> Any:
        release.wait(10)
        try:
            return resolve(*args, **kwargs)
        finally:
            resolved.set()

    monkeypatch.setattr(socket, "getaddrinfo", hanging)
    client = DeadlineClient(f"http://localhost:{node.port}")
    started = time.monotonic()
    with pytest.raises(ChainUnavailable) as raised:
        client.batch([("eth_chainId", [])], deadline=started + 0.3)
    assert 0.3 <= time.monotonic() - started < 0.6
    assert error_kind(raised.value) == "timeout"
    release.set()
    assert resolved.wait(5)
    time.sleep(0.2)  # the late connection is opened, then closed: the batch is never sent late
    assert node.requests == []


# --- failures the node answers ------------------------------------------------------------------


def test_http_errors_and_garbage_are_unavailable_and_never_name_the_url():
    answers = iter(
        [
            (503, b"busy"),
            (200, b"<html>not json</html>"),
            (200, b'{"jsonrpc": "2.0", "id": 0, "result": "0x1"}'),  # one answer, not a batch
        ]
    )
    server = Node(lambda batch: next(answers))
    url = f"http://someone:s3cret@127.0.0.1:{server.port}/v3/PROJECTKEY"
    try:
        client = DeadlineClient(url)
        messages = []
        for expected in ("answered HTTP 503", "not JSON", "not a batch"):
            with pytest.raises(ChainUnavailable, match=expected) as raised:
                client.batch([("eth_chainId", [])], deadline=within(5))
            messages.append(str(raised.value))
    finally:
        server.stop()
    for message in messages:
        for secret in ("s3cret", "someone", "PROJECTKEY", str(server.port)):
            assert secret not in message
    # The URL's path and credentials were used: HTTP basic authentication, as requests sends it.
    _, line, headers, _ = server.requests[0]
    assert line == "POST /v3/PROJECTKEY HTTP/1.1"
    assert headers["Authorization"] == "Basic " + base64.b64encode(b"someone:s3cret").decode()


# --- proxies from the environment ----------------------------------------------------------------


def test_an_http_proxy_from_the_environment_carries_the_batch(node, monkeypatch):
    for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy", "https_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", f"http://proxyuser:proxypass@127.0.0.1:{node.port}")
    monkeypatch.setenv("http_proxy", f"http://proxyuser:proxypass@127.0.0.1:{node.port}")
    client = DeadlineClient("http://node.invalid:8545/rpc")  # never resolved: the proxy is
    assert client.batch([("eth_chainId", [])], deadline=within(5)) == [hex(CHAIN_ID)]
    ((_, line, headers, _),) = node.requests
    assert line == "POST http://node.invalid:8545/rpc HTTP/1.1"
    credentials = base64.b64encode(b"proxyuser:proxypass").decode()
    assert headers["Proxy-Authorization"] == f"Basic {credentials}"


def test_a_proxy_of_another_kind_is_refused_without_naming_it(monkeypatch):
    for name in ("NO_PROXY", "no_proxy", "HTTP_PROXY", "http_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ALL_PROXY", "socks5://127.0.0.1:1080")
    monkeypatch.setenv("all_proxy", "socks5://127.0.0.1:1080")
    with pytest.raises(ChainUnavailable) as raised:
        DeadlineClient("http://node.invalid:8545")
    assert "1080" not in str(raised.value)
    assert "node.invalid" not in str(raised.value)
