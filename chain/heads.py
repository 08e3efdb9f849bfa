"""New-head notices over WebSocket (`eth_subscribe` to `newHeads`), for the head follower.

A subscription only wakes the follower: it sets an event on every new head the node
announces, so that the follower reads the head (over HTTP, as always) at once instead of at
its next poll. Nothing is read from the notices themselves, so a lost, late or duplicated
notice costs at most one poll interval, and a node without WebSocket (or a URL that does not
answer) leaves the follower polling as before. The connection is made again with exponential
backoff (up to `max_backoff` seconds) while the subscription runs.
"""

from __future__ import annotations

import json
import logging
import threading

from websockets.exceptions import WebSocketException
from websockets.sync.client import connect

logger = logging.getLogger(__name__)


def backoff(failures: int, *, base: float, cap: float) -> float:
    """The wait after `failures` failures in a row: base, then doubling, at most `cap`."""
    return min(base * 2 ** min(failures - 1, 16), cap)


def ws_url_for(chain_id: int, *, urls: dict[int, str]) -> str | None:
    """The chain's WebSocket node (WS_URL_<chainId>), or None: poll only."""
    return urls.get(chain_id) or None


class HeadSubscription:
    """Sets `wake` on every new head of the node at `url`, on a thread of its own, until
    `stop()`. `connected` tells whether a subscription is live now."""

    def __init__(
        self, url: str, wake: threading.Event, *, timeout: float = 10.0, max_backoff: float = 30.0
    ) -> None:
        self.url, self.wake, self.timeout, self.max_backoff = url, wake, timeout, max_backoff
        self.connected = threading.Event()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="new-heads", daemon=True)

    def start(self) -> HeadSubscription:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopped.set()
        self._thread.join(self.timeout + 1)

    def _run(self) -> None:
        failures = 0
        while not self._stopped.is_set():
            try:
                self._listen()
                failures = 0
            except (OSError, TimeoutError, ValueError, WebSocketException) as exc:
                failures += 1
                delay = backoff(failures, base=1, cap=self.max_backoff)
                # The URL may hold an API key: only the kind of failure is logged.
                logger.warning(
                    "new-head subscription failed (%s); polling only, retry in %ss",
                    type(exc).__name__,
                    delay,
                )
                self._stopped.wait(delay)
            finally:
                self.connected.clear()

    def _listen(self) -> None:
        with connect(self.url, open_timeout=self.timeout, close_timeout=1) as ws:
            request = {"jsonrpc": "2.0", "id": 1, "method": "eth_subscribe", "params": ["newHeads"]}
            ws.send(json.dumps(request))
            answer = json.loads(ws.recv(timeout=self.timeout))
            if "result" not in answer:
                raise ValueError("the node refused eth_subscribe newHeads")
            self.connected.set()
            self.wake.set()  # a head may have come while there was no subscription
            while not self._stopped.is_set():
                try:
                    message = ws.recv(timeout=0.5)
                except TimeoutError:
                    continue
                if json.loads(message).get("method") == "eth_subscription":
                    self.wake.set()
