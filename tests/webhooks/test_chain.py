"""Webhooks of the devnet's real events, on anvil: what the receivers get is compared with the
logs plain web3 decodes (`get_logs`), never with the service's tables."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import Any

import pytest
from django.core.management import call_command

from devchain.devnet import make_deposits
from tests.chainreads import chain_events
from tests.webhooks.conftest import register
from webhooks.dispatcher import Dispatcher

pytestmark = [pytest.mark.django_db, pytest.mark.chain]
# One devnet is enough: the webhooks read what the indexer stored.
DEVNET = pytest.mark.parametrize("devnet_kind", ["multicall3"], indirect=True)
WAD = 10**18
WALLET_ARGS = ("sender", "receiver", "from", "to", "depositor", "initiator")


def sync() -> None:
    call_command("lat_sync", "--no-progress")


def send(chain, call, sender: str) -> dict[str, Any]:
    receipt = chain.w3.eth.wait_for_transaction_receipt(call.transact({"from": sender}))
    assert receipt["status"] == 1
    return receipt


def iso(timestamp: int) -> str:
    return datetime.fromtimestamp(timestamp, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def digest_id(chain_id: int, block_hash: str, tx_hash: str, log_index: int) -> str:
    """The payload's id as extensions.md and the README define it: `evt_` + the first 32 hex
    digits of SHA-256 over `{chainId}:{blockHash}:{transactionHash}:{logIndex}` (0x-hex, lower
    case)."""
    text = f"{chain_id}:{block_hash.lower()}:{tx_hash.lower()}:{log_index}"
    return "evt_" + hashlib.sha256(text.encode()).hexdigest()[:32]


def expected(chain, manifests, after_block: int) -> dict[str, dict[str, Any]]:
    """The payloads' `data` by id: every feed event after `after_block`, from web3."""
    out = {}
    head = chain.w3.eth.block_number
    for manifest in manifests:
        for event in chain_events(chain, manifest, head):
            if event["blockNumber"] <= after_block:
                continue
            block_hash = chain.w3.eth.get_block(event["blockNumber"])["hash"].to_0x_hex()
            event_id = digest_id(
                chain.w3.eth.chain_id, block_hash, event["transactionHash"], event["logIndex"]
            )
            out[event_id] = {
                **event,
                "blockTimestamp": iso(event["blockTimestamp"]),
                "lat": manifest["proxyAddress"],
                "chainId": chain.w3.eth.chain_id,
            }
    return out


def received_data(server, secret: str) -> dict[str, dict[str, Any]]:
    out = {}
    for received in server.received:
        body = received.verify(secret)
        assert body["id"] == received.id
        out[body["id"]] = body["data"]
    return out


def names(event: dict[str, Any], wallet: str) -> bool:
    return any(str(event["args"].get(name, "")).lower() == wallet.lower() for name in WALLET_ARGS)


def filtered_activity(chain, wallet: str) -> int:
    """Deposits into two LATs (one to `wallet`), a transfer to the wallet and one from it,
    then a sync; returns the block before them."""
    before = chain.w3.eth.block_number
    first, second = chain.manifests[0], chain.manifests[1]
    token = first["tokens"][0]["address"]
    make_deposits(chain.url, first, 1, [token], [WAD])
    make_deposits(chain.url, first, 2, [token], [2 * WAD], receiver=wallet)
    make_deposits(chain.url, second, 3, [second["tokens"][0]["address"]], [WAD])
    lt = chain.contract("LiquidToken", first["proxyAddress"])
    send(chain, lt.functions.transfer(wallet, WAD // 2), chain.account(1))
    send(chain, lt.functions.transfer(chain.account(6), WAD // 4), wallet)
    sync()
    return before


@DEVNET
def test_events_reach_the_subscribed_endpoints_once_and_exactly_as_filtered(
    synced, keyed, receiver
):
    chain = synced
    second = chain.manifests[1]
    wallet = chain.account(5)
    every, by_type, by_lat, by_wallet = (receiver() for _ in range(4))
    secrets = {
        "every": register(keyed, every.url())["secret"],
        "type": register(keyed, by_type.url(), types=["transfer", "deposit"])["secret"],
        "lat": register(keyed, by_lat.url(), lats=[second["proxyAddress"].lower()])["secret"],
        "wallet": register(keyed, by_wallet.url(), wallets=[wallet])["secret"],
    }
    registered_at = filtered_activity(chain, wallet)
    dispatcher = Dispatcher(workers=8, per_endpoint=4)
    try:
        dispatcher.drain()
    finally:
        dispatcher.close()

    want = expected(chain, chain.manifests, registered_at)
    kinds = {e["type"] for e in want.values()}
    assert {"deposit", "transfer"} <= kinds
    # Each id once, signed, its data as the feed shows the event plus lat and chainId.
    for server in (every, by_type, by_lat, by_wallet):
        assert len(server.ids()) == len(set(server.ids()))
    assert received_data(every, secrets["every"]) == want
    assert received_data(by_type, secrets["type"]) == {
        i: e for i, e in want.items() if e["type"] in ("transfer", "deposit")
    }
    assert received_data(by_lat, secrets["lat"]) == {
        i: e for i, e in want.items() if e["lat"] == second["proxyAddress"]
    }
    by_wallet_want = {i: e for i, e in want.items() if names(e, wallet)}
    assert len(by_wallet_want) == 3  # the deposit to it, both transfers
    assert received_data(by_wallet, secrets["wallet"]) == by_wallet_want


@DEVNET
def test_a_pause_is_pushed_as_status_changed(synced, keyed, receiver):
    chain = synced
    manifest = chain.manifests[0]
    server = receiver()
    secret = register(keyed, server.url(), types=["statusChanged", "paused"])["secret"]
    lt = chain.contract("LiquidToken", manifest["proxyAddress"])
    receipt = send(chain, lt.functions.pause(), chain.account(0))
    sync()
    dispatcher = Dispatcher(workers=4, per_endpoint=2)
    try:
        dispatcher.drain()
    finally:
        dispatcher.close()
    bodies = [r.verify(secret) for r in server.received]
    assert sorted(b["type"] for b in bodies) == ["paused", "statusChanged"]
    status = next(b for b in bodies if b["type"] == "statusChanged")
    assert status["data"] == {
        "lat": manifest["proxyAddress"],
        "chainId": chain.w3.eth.chain_id,
        "paused": lt.functions.paused().call(),
        "pricesStale": status["data"]["pricesStale"],
        "stateBlock": receipt["blockNumber"],
    }
    assert status["data"]["paused"] is True


@DEVNET
def test_an_event_orphaned_by_a_reorg_is_withdrawn(synced, keyed, receiver):
    chain = synced
    manifest = chain.manifests[0]
    server = receiver()
    secret = register(keyed, server.url(), types=["transfer", "eventRemoved"])["secret"]
    lt = chain.contract("LiquidToken", manifest["proxyAddress"])
    fork = chain.rpc("evm_snapshot")
    orphan = send(chain, lt.functions.transfer(chain.account(9), WAD), chain.account(1))
    sync()
    dispatcher = Dispatcher(workers=4, per_endpoint=2)
    try:
        dispatcher.drain()
        (delivered,) = [r.verify(secret) for r in server.received]
        assert delivered["data"]["transactionHash"] == orphan["transactionHash"].to_0x_hex()

        assert chain.rpc("evm_revert", fork)
        kept = send(chain, lt.functions.transfer(chain.account(10), WAD // 3), chain.account(2))
        chain.rpc("anvil_mine", hex(3))
        sync()
        dispatcher.drain()
    finally:
        dispatcher.close()
    bodies = [r.verify(secret) for r in server.received]
    assert [b["type"] for b in bodies] == ["transfer", "eventRemoved", "transfer"] or [
        b["type"] for b in bodies
    ] == ["transfer", "transfer", "eventRemoved"]
    removal = next(b for b in bodies if b["type"] == "eventRemoved")
    assert removal["data"]["removedId"] == delivered["id"]
    assert removal["data"]["lat"] == manifest["proxyAddress"]
    new = [b for b in bodies[1:] if b["type"] == "transfer"]
    assert [b["data"]["transactionHash"] for b in new] == [kept["transactionHash"].to_0x_hex()]
