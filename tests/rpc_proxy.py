"""A JSON-RPC node in front of anvil, for the node faults anvil cannot be made to produce.

`RpcProxy(upstream)` listens on 127.0.0.1 (a threaded http.server) and forwards every request,
single or batch, to the real node; the behaviours below, all off by default, change the answers:

- `chain_id`: eth_chainId answers this (a node on another chain);
- `head`: eth_blockNumber answers at most this, and blocks above it are `null`, as are those in
  `missing_blocks` (a lagging node, or one behind a load balancer that lost a block);
- `max_log_range`: eth_getLogs over more blocks is refused with a JSON-RPC error, as hosted
  providers do (`refused` keeps the sizes asked, `log_spans` those served);
- `tamper_log_hashes`: that many eth_getLogs answers that hold logs get a wrong blockHash on
  their first log (a node answering from another branch than its headers).

Every served eth_getLogs query is kept in `log_queries` as (address, first, last), once per
address it names.
"""

from __future__ import annotations

import http.server
import json
import socketserver
import threading
from typing import Any

import requests

WRONG_HASH = "0x" + "ee" * 32


def _addresses(query: dict[str, Any]) -> list[str]:
    """The addresses an eth_getLogs query names (one, or a list), lower case."""
    address = query.get("address", "")
    return [str(a).lower() for a in (address if isinstance(address, list) else [address])]


class _Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


class RpcProxy:
    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.chain_id: int | None = None
        self.head: int | None = None
        self.missing_blocks: set[int] = set()
        self.max_log_range: int | None = None
        self.tamper_log_hashes = 0
        self.refused: list[tuple[str, int]] = []  # (address, blocks asked)
        self.log_queries: list[tuple[str, int, int]] = []
        self._lock = threading.Lock()
        self._local = threading.local()
        self._server = _Server(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    # --- answering ---------------------------------------------------------------------------

    def _handler(self):
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                payload = json.dumps(proxy.answer(json.loads(body))).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args: Any) -> None:
                pass

        return Handler

    def _session(self) -> requests.Session:
        session = getattr(self._local, "session", None)
        if session is None:
            session = self._local.session = requests.Session()
            session.trust_env = False
        return session

    def _forward(self, request: Any) -> Any:
        response = self._session().post(self.upstream, json=request, timeout=60)
        return response.json()

    def answer(self, request: Any) -> Any:
        items = request if isinstance(request, list) else [request]
        refusals = {i: self._refusal(item) for i, item in enumerate(items)}
        forward = [item for i, item in enumerate(items) if refusals[i] is None]
        if isinstance(request, list):
            by_id = {r["id"]: r for r in (self._forward(forward) if forward else [])}
        else:
            by_id = {request.get("id"): self._forward(request)} if forward else {}
        answers = [
            refusals[i] if refusals[i] is not None else self._change(item, by_id[item.get("id")])
            for i, item in enumerate(items)
        ]
        return answers if isinstance(request, list) else answers[0]

    def _refusal(self, item: dict[str, Any]) -> dict[str, Any] | None:
        if item.get("method") != "eth_getLogs" or self.max_log_range is None:
            return None
        query = item["params"][0]
        span = int(query["toBlock"], 16) - int(query["fromBlock"], 16) + 1
        if span <= self.max_log_range:
            return None
        with self._lock:
            self.refused += [(address, span) for address in _addresses(query)]
        return {
            "jsonrpc": "2.0",
            "id": item.get("id"),
            "error": {"code": -32005, "message": f"query exceeds {self.max_log_range} blocks"},
        }

    def _change(self, item: dict[str, Any], response: dict[str, Any]) -> dict[str, Any]:
        method, result = item.get("method"), response.get("result")
        if method == "eth_chainId" and self.chain_id is not None:
            response["result"] = hex(self.chain_id)
        elif method == "eth_blockNumber" and self.head is not None and result:
            response["result"] = hex(min(int(result, 16), self.head))
        elif method == "eth_getBlockByNumber" and str(item["params"][0]).startswith("0x"):
            number = int(item["params"][0], 16)
            if (self.head is not None and number > self.head) or number in self.missing_blocks:
                response["result"] = None
        elif method == "eth_getLogs" and isinstance(result, list):
            query = item["params"][0]
            first, last = int(query["fromBlock"], 16), int(query["toBlock"], 16)
            with self._lock:
                self.log_queries += [(address, first, last) for address in _addresses(query)]
                if result and self.tamper_log_hashes > 0:
                    self.tamper_log_hashes -= 1
                    result[0] = {**result[0], "blockHash": WRONG_HASH}
        return response

    # --- what was asked ----------------------------------------------------------------------

    def log_spans(self, address: str) -> list[int]:
        """The block counts of the eth_getLogs queries served for an address."""
        return [last - first + 1 for a, first, last in self.log_queries if a == address.lower()]

    def refused_for(self, address: str) -> list[int]:
        return [span for a, span in self.refused if a == address.lower()]
