"""The freshness promise's client and clock (extensions.md, "Freshness"), shared by the tests that
hold a deposit to it (tests/e2e/test_freshness.py, tests/replicas/test_freshness.py): a deposit
made on anvil as the chain reports it, its confirmation at CONFIRMATIONS deep, and a client
polling GET /metrics/deposits with If-None-Match until it lists every confirmed deposit."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import requests
from web3.logs import DISCARD

from devchain.devnet import make_deposits
from tests.chainreads import chain_deposits, deposit_row
from tests.conftest import Chain

WAD = 10**18
CHAIN_ID = 31337
CONFIRMATIONS = 2
BOUND = 2.0  # seconds: the freshness promise
FIRST_PASS = 180.0  # seconds the follower may take to backfill a fresh database
LATENCIES: dict[str, list[float]] = {}


def wait_for(predicate: Callable[[], Any], timeout: float, what: str) -> float:
    """Seconds until `predicate()` held, polled every 20 ms; fails past `timeout`."""
    started = time.monotonic()
    while not predicate():
        assert time.monotonic() - started < timeout, f"{what}: not within {timeout} s"
        time.sleep(0.02)
    return time.monotonic() - started


class Client:
    """GET /metrics/deposits over HTTP, with If-None-Match as a polling client would."""

    def __init__(self, base_url: str) -> None:
        self.url = f"{base_url}/metrics/deposits?take=100"
        self.session = requests.Session()
        self.etag: str | None = None
        self.rows: list[dict[str, Any]] = []
        self.statuses: list[int] = []

    def deposits(self) -> list[dict[str, Any]]:
        headers = {"If-None-Match": self.etag} if self.etag else {}
        response = self.session.get(self.url, headers=headers, timeout=10)
        self.statuses.append(response.status_code)
        if response.status_code == 304:
            assert response.content == b""
            assert response.headers["ETag"] == self.etag
            return self.rows
        assert response.status_code == 200, response.text
        self.etag = response.headers["ETag"]
        self.rows = response.json()["data"]
        return self.rows

    def served(self, tx_hash: str) -> list[dict[str, Any]]:
        return [row for row in self.deposits() if row["transactionHash"] == tx_hash]


def deposit(chain: Chain, manifest: dict[str, Any], wallet: int, amount: int) -> dict[str, Any]:
    """A deposit of `amount` of the LAT's first token from anvil account `wallet`, and what the
    chain says of it: the receipt's transaction and block, and its decoded deposit event."""
    token = manifest["tokens"][0]["address"]
    done = make_deposits(chain.url, manifest, wallet, [token], [amount])
    receipt = chain.w3.eth.get_transaction_receipt(done["txHash"])
    assert receipt["status"] == 1
    lat = chain.contract("LiquidToken", manifest["proxyAddress"])
    events = [
        *lat.events.AssetDeposited().process_receipt(receipt, errors=DISCARD),
        *lat.events.Deposit().process_receipt(receipt, errors=DISCARD),
    ]
    assert len(events) == 1
    return deposit_row(events[0], manifest)


def confirm(chain: Chain, block: int) -> float:
    """Mine until `block` is CONFIRMATIONS deep; the moment the confirming block was mined."""
    while chain.w3.eth.block_number < block + CONFIRMATIONS:
        chain.rpc("evm_mine")
    return time.monotonic()


def served_row(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row.items() if k != "createdAt"}


def confirmed_deposits(chain: Chain) -> list[dict[str, Any]]:
    """Every deposit of the chain at the confirmation depth, newest first (as the API lists)."""
    confirmed = chain.w3.eth.block_number - CONFIRMATIONS
    return [d for d in chain_deposits(chain) if d["createdAtBlock"] <= confirmed]


def record(label: str, seconds: float) -> float:
    LATENCIES.setdefault(label, []).append(round(seconds, 3))
    print(f"freshness: {label}: {seconds:.3f} s")
    return seconds


def assert_fresh(client: Client, chain: Chain, expected: dict[str, Any], label: str) -> None:
    """Confirm the deposit, then wait until the API lists every deposit the chain holds at the
    confirmation depth (this one and any other that its confirming block confirmed); that
    latency must be within BOUND."""
    assert not client.served(expected["transactionHash"])  # not before its confirmation
    confirmed = confirm(chain, expected["createdAtBlock"])
    everything = confirmed_deposits(chain)
    assert expected in everything
    wait_for(lambda: [served_row(r) for r in client.deposits()] == everything, 10 * BOUND, label)
    latency = record(label, time.monotonic() - confirmed)
    assert latency <= BOUND, f"{label}: served {latency:.3f} s after its confirmation"
