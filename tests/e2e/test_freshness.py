"""The freshness promise end to end (extensions.md, "Freshness"): a deposit is served by
GET /metrics/deposits within 2 seconds of its block reaching the confirmation depth.

The production pieces run for real: the head follower (sync.follow.Follower, on a thread,
with the production poll interval and backoff), the API on a live server (pytest-django's
`live_server`, asked over HTTP) and an anvil devnet. The chain keeps 2 confirmations here (the
devnet's default is 0), so that the depth is exercised: each deposit is followed by `evm_mine`
calls, and the clock starts when the call that mines the confirming block returns. The client
polls as a real one would, with If-None-Match: it gets 304s until the data changes.

Expected values come from the chain (the receipt and its decoded event), never from the
service. Besides a plain run: a reorg (evm_snapshot, a deposit, evm_revert, a deposit on the new
branch at the same heights) and a node restart (the test's own anvil stopped, the follower
backing off, a node started again on the same port from the state the first one dumped).

The latencies measured are printed (`-s` shows them) and kept in LATENCIES.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from django.core.management import call_command
from web3 import Web3
from web3.logs import DISCARD

from devchain.anvil import AnvilNode, start_anvil
from devchain.devnet import connect, deploy_devnet, devnet_genesis, make_deposits, write_manifests
from sync.follow import Follower
from tests.chainreads import chain_deposits, hexstr
from tests.conftest import Chain
from tests.following import Running

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.chain]

WAD = 10**18
CHAIN_ID = 31337
CONFIRMATIONS = 2
BOUND = 2.0  # seconds: the freshness promise
FIRST_PASS = 180.0  # seconds the follower may take to backfill a fresh database
LATENCIES: dict[str, list[float]] = {}


# --- the running pieces ----------------------------------------------------------------------


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
    event = events[0]
    return {
        "sender": event["args"]["sender"],
        "receiver": event["args"]["receiver"],
        "asset": event["args"]["asset"],
        "liquidTokenAddress": manifest["proxyAddress"],
        "amount": str(event["args"]["amount"]),
        "shares": str(event["args"]["shares"]),
        "createdAtBlock": receipt["blockNumber"],
        "transactionHash": hexstr(receipt["transactionHash"]),
        "logIndex": event["logIndex"],
    }


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


@pytest.fixture
def confirmations(settings) -> None:
    settings.CHAIN_CONFIRMATIONS_BY_CHAIN = {CHAIN_ID: CONFIRMATIONS}


@pytest.fixture
def following(imported, confirmations) -> Iterator[Follower]:
    """The follower on the devnet, with the production poll interval, past its first pass."""
    with Running(Follower(CHAIN_ID)) as follower:
        wait_for(lambda: follower.seen is not None, FIRST_PASS, "the first pass")
        yield follower


@pytest.fixture
def client(live_server) -> Client:
    return Client(live_server.url)


# --- the tests -------------------------------------------------------------------------------


def test_deposits_are_served_within_two_seconds_of_confirmation(following, chain, client):
    assert [served_row(r) for r in client.deposits()] == confirmed_deposits(chain)
    for n, (symbol, wallet) in enumerate([("latETH", 13), ("latETH", 14), ("latBTC", 13)]):
        manifest = chain.lat(symbol)
        expected = deposit(chain, manifest, wallet, (n + 2) * WAD)
        time.sleep(1.5 * following.poll_interval)  # the follower had a chance to act too early
        assert_fresh(client, chain, expected, f"deposit ({chain.kind})")
    assert 304 in client.statuses  # the client polled with If-None-Match and got 304s


def test_a_reorg_is_served_within_two_seconds(following, chain, client):
    manifest = chain.lat("latETH")
    fork = chain.rpc("evm_snapshot")
    orphan = deposit(chain, manifest, 13, 5 * WAD)
    assert_fresh(client, chain, orphan, f"deposit before the reorg ({chain.kind})")
    old_head = chain.w3.eth.get_block("latest")

    assert chain.rpc("evm_revert", fork)
    replacement = deposit(chain, manifest, 14, 7 * WAD)
    # The new branch reaches the same heights with other blocks.
    assert replacement["createdAtBlock"] == orphan["createdAtBlock"]
    assert replacement["transactionHash"] != orphan["transactionHash"]
    confirmed = confirm(chain, replacement["createdAtBlock"])
    new_head = chain.w3.eth.get_block("latest")
    assert new_head["number"] == old_head["number"]
    assert new_head["hash"] != old_head["hash"]
    everything = confirmed_deposits(chain)
    assert replacement in everything
    assert orphan["transactionHash"] not in {d["transactionHash"] for d in everything}
    seen: dict[str, float] = {}

    def settled() -> bool:
        rows = [served_row(r) for r in client.deposits()]
        hashes = {row["transactionHash"] for row in rows}
        now = time.monotonic()
        if orphan["transactionHash"] not in hashes:
            seen.setdefault("removed", now)
        if replacement["transactionHash"] in hashes:
            seen.setdefault("added", now)
        return rows == everything

    wait_for(settled, 10 * BOUND, "the reorg served")
    removed = record(f"reorged deposit removed ({chain.kind})", seen["removed"] - confirmed)
    added = record(f"deposit on the new branch ({chain.kind})", seen["added"] - confirmed)
    assert removed <= BOUND
    assert added <= BOUND


# --- a node restart, on an anvil of the test's own ------------------------------------------


@pytest.fixture
def own_node(tmp_path: Path) -> Iterator[dict[str, Any]]:
    """An anvil of this test's own, with the demo LATs, and the state file it dumps on stop."""
    state = tmp_path / "anvil-state.json"
    node = start_anvil(state_file=state, timestamp=devnet_genesis())
    nodes = [node]
    try:
        manifests = deploy_devnet(node.url)
        yield {"node": node, "nodes": nodes, "state": state, "manifests": manifests}
    finally:
        for started in nodes:
            started.stop()


def test_after_a_node_restart_deposits_are_served_within_two_seconds(
    own_node, settings, confirmations, tmp_path, live_server
):
    node: AnvilNode = own_node["node"]
    chain = Chain(node.url, connect(node.url), own_node["manifests"])
    settings.RPC_URL = node.url
    call_command("lat_import", *map(str, write_manifests(chain.manifests, tmp_path / "m")))
    client = Client(live_server.url)
    manifest = chain.lat("latETH")
    running = Running(Follower(CHAIN_ID, max_backoff=4.0))
    with running as follower:
        wait_for(lambda: follower.seen is not None, FIRST_PASS, "the first pass")
        before = deposit(chain, manifest, 13, 3 * WAD)
        assert_fresh(client, chain, before, "deposit before the restart")

        head = chain.w3.eth.get_block("latest")
        node.stop()  # SIGINT: anvil dumps its state to the state file
        wait_for(lambda: follower.failures >= 3, 30, "the follower backing off")
        assert client.served(before["transactionHash"])  # the API answers from the database

        restarted = start_anvil(port=node.port, state_file=own_node["state"], reuse=False)
        own_node["nodes"].append(restarted)
        started = time.monotonic()
        chain = Chain(restarted.url, connect(restarted.url), own_node["manifests"])
        again = chain.w3.eth.get_block(head["number"])
        assert (again["number"], again["hash"]) == (head["number"], head["hash"])  # same chain
        recovered = wait_for(lambda: follower.failures == 0, 10, "the follower reconnecting")
        record("follower back after the node restart (backoff up to 4 s)", recovered)
        assert time.monotonic() - started <= follower.max_backoff + BOUND

        after = deposit(chain, manifest, 14, 4 * WAD)
        assert_fresh(client, chain, after, "deposit after the restart")
        assert running.error is None
    assert Web3.to_checksum_address(after["sender"]) == chain.account(14)
