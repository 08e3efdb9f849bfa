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

The latencies measured are printed (`-s` shows them) and kept in tests.freshness.LATENCIES.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from web3 import Web3

from devchain.anvil import AnvilNode, start_anvil
from devchain.devnet import connect, deploy_devnet, devnet_genesis, write_manifests
from sync.follow import Follower
from tests.conftest import Chain
from tests.following import Running
from tests.freshness import (
    BOUND,
    CHAIN_ID,
    CONFIRMATIONS,
    FIRST_PASS,
    WAD,
    Client,
    assert_fresh,
    confirm,
    confirmed_deposits,
    deposit,
    record,
    served_row,
    wait_for,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.chain]


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
