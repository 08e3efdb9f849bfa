"""Reorgs on anvil, as a webhook receiver and a live stream see them: an event orphaned by a
reorg is withdrawn (`eventRemoved`) from every subscriber that was sent it, whatever its
`types`, and a transaction mined again in another block is a new event with a new id. Ids are
computed here from what web3 reads of the chain (extensions.md: a digest of the chain id, block
hash, transaction hash and log index), never read from the service's tables."""

from __future__ import annotations

import time
from typing import Any

import pytest
from django.core.management import call_command
from eth_account import Account

from devchain.anvil import DEFAULT_MNEMONIC
from devchain.devnet import make_deposits
from tests.stream import conftest as stream_fixtures
from tests.webhooks.conftest import register
from tests.webhooks.test_chain import digest_id
from webhooks.dispatcher import Dispatcher

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.chain]
DEVNET = pytest.mark.parametrize("devnet_kind", ["multicall3"], indirect=True)
WAD = 10**18
Account.enable_unaudited_hdwallet_features()
# The stream process and its clients, as tests/stream has them.
stream_process, connect = stream_fixtures.stream_process, stream_fixtures.connect


def sync() -> None:
    call_command("lat_sync", "--no-progress")


def deliver(until) -> None:
    dispatcher = Dispatcher(workers=4, per_endpoint=2)
    try:
        dispatcher.drain(until=until)
    finally:
        dispatcher.close()


def log_of(receipt: Any, address: str) -> Any:
    (log,) = [log for log in receipt["logs"] if log["address"] == address]
    return log


def signed_transfer(chain, lat: str, to: str, amount: int) -> bytes:
    """A transfer of the LAT from anvil's account 1, signed once: sent twice, it is the same
    transaction (same hash) wherever it is mined."""
    account = Account.from_mnemonic(DEFAULT_MNEMONIC, account_path="m/44'/60'/0'/0/1")
    assert account.address == chain.account(1)
    call = chain.contract("LiquidToken", lat).functions.transfer(to, amount)
    tx = call.build_transaction(
        {
            "from": account.address,
            "nonce": chain.w3.eth.get_transaction_count(account.address),
            "gas": 200_000,
            "maxFeePerGas": 10 * chain.w3.eth.gas_price,
            "maxPriorityFeePerGas": 1,
            "chainId": chain.w3.eth.chain_id,
        }
    )
    return account.sign_transaction(tx).raw_transaction


def mined(chain, raw: bytes) -> Any:
    receipt = chain.w3.eth.wait_for_transaction_receipt(chain.w3.eth.send_raw_transaction(raw))
    assert receipt["status"] == 1
    return receipt


@DEVNET
def test_a_transaction_mined_again_in_another_block_is_a_new_event(
    synced, keyed, receiver, connect
):
    chain = synced
    chain_id = chain.w3.eth.chain_id
    lat = chain.manifests[0]["proxyAddress"]
    server = receiver()
    secret = register(keyed, server.url(), lats=[lat])["secret"]
    stream = connect(f"lats={lat}")
    time.sleep(0.3)  # subscribed
    raw = signed_transfer(chain, lat, chain.account(9), WAD)

    fork = chain.rpc("evm_snapshot")
    first = mined(chain, raw)
    sync()
    deliver(until=lambda: len(server.received) >= 1)
    (sent,) = stream.wait(1)
    first_log = log_of(first, lat)
    old_id = digest_id(
        chain_id, first["blockHash"].to_0x_hex(), first["transactionHash"].to_0x_hex(), 0
    )
    assert first_log["logIndex"] == 0
    assert [r.verify(secret)["id"] for r in server.received] == [old_id]
    assert sent.data["id"] == old_id

    # The same signed transaction, mined again at the same height and log index, in a block of
    # another time: another block hash, nothing else differs.
    assert chain.rpc("evm_revert", fork)
    timestamp = chain.w3.eth.get_block(first["blockNumber"] - 1)["timestamp"]
    chain.rpc("evm_setNextBlockTimestamp", timestamp + 100)
    second = mined(chain, raw)
    second_log = log_of(second, lat)
    assert second["transactionHash"] == first["transactionHash"]
    assert (second["blockNumber"], second_log["logIndex"]) == (first["blockNumber"], 0)
    assert second["blockHash"] != first["blockHash"]
    new_id = digest_id(
        chain_id, second["blockHash"].to_0x_hex(), second["transactionHash"].to_0x_hex(), 0
    )
    sync()
    deliver(until=lambda: len(server.received) >= 3)

    bodies = {b["type"]: b for b in (r.verify(secret) for r in server.received[1:])}
    assert sorted(bodies) == ["eventRemoved", "transfer"]
    assert bodies["eventRemoved"]["data"]["removedId"] == old_id
    assert bodies["transfer"]["id"] == new_id != old_id
    assert bodies["transfer"]["data"]["transactionHash"] == first["transactionHash"].to_0x_hex()
    got = stream.wait(3)
    assert [m.event for m in got] == ["transfer", "eventRemoved", "transfer"]
    assert got[1].data["data"]["removedId"] == old_id
    assert got[2].data["id"] == new_id


@DEVNET
def test_a_deposit_removed_by_a_reorg_is_withdrawn_from_deposit_subscribers(
    synced, keyed, receiver, connect
):
    """Subscribers to `deposit` only, neither listing `eventRemoved`: each was sent the
    deposit, so each hears that it is gone."""
    chain = synced
    chain_id = chain.w3.eth.chain_id
    manifest = chain.manifests[0]
    server = receiver()
    secret = register(keyed, server.url(), types=["deposit"])["secret"]
    stream = connect("types=deposit")
    time.sleep(0.3)

    fork = chain.rpc("evm_snapshot")
    made = make_deposits(chain.url, manifest, 3, [manifest["tokens"][0]["address"]], [WAD])
    receipt = chain.w3.eth.get_transaction_receipt(made["txHash"])
    deposited = [
        log
        for log in chain.contract("LiquidToken", manifest["proxyAddress"])
        .events.AssetDeposited()
        .process_receipt(receipt)
    ]
    (log,) = deposited
    deposit_id = digest_id(chain_id, log["blockHash"].to_0x_hex(), made["txHash"], log["logIndex"])
    sync()
    deliver(until=lambda: len(server.received) >= 1)
    (sent,) = stream.wait(1)
    assert [r.verify(secret)["id"] for r in server.received] == [deposit_id]
    assert sent.data["id"] == deposit_id

    assert chain.rpc("evm_revert", fork)
    chain.rpc("anvil_mine", hex(4))  # the chain goes on without the deposit
    sync()
    deliver(until=lambda: len(server.received) >= 2)

    bodies = [r.verify(secret) for r in server.received]
    assert [b["type"] for b in bodies] == ["deposit", "eventRemoved"]
    assert bodies[1]["data"]["removedId"] == deposit_id
    assert bodies[1]["data"]["removedType"] == "deposit"
    got = stream.wait(2)
    assert [m.event for m in got] == ["deposit", "eventRemoved"]
    assert got[1].data["data"]["removedId"] == deposit_id
    time.sleep(1)
    assert len(server.received) == 2  # nothing else
    assert len(stream.messages) == 2
