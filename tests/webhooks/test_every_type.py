"""Every event type of extensions.md reaches a subscribed endpoint, on anvil with the devnet's
contracts: each type is made to happen (a deposit of each event shape, transfers, a pause and
unpause, a price and a threshold update, a token added and removed, a node created, delegated,
staked to and undelegated, max nodes, a deposit while prices are stale, upgrades, a reorg),
indexed by `lat_sync`, dispatched, and what the receivers got is compared with the logs plain
web3 decodes (`get_logs` with the ABI: tests/chainreads.py), with `paused()` and
`arePricesStale()` read at each refresh's block for `statusChanged`, and with the orphaned
transaction's receipt for `eventRemoved`. Never with the service's tables.

Two endpoints: one with no filter, one naming every type. Each gets every id once, each body
signed as the `standardwebhooks` package verifies.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from django.core.management import call_command
from web3.logs import DISCARD

from devchain import compile as chain_compile
from devchain.devnet import make_deposits
from tests.chainreads import FEED_TYPES, hexstr
from tests.webhooks.conftest import register
from tests.webhooks.test_chain import digest_id, expected, iso, send
from webhooks.dispatcher import Dispatcher

pytestmark = [pytest.mark.django_db, pytest.mark.chain]
DEVNET = pytest.mark.parametrize("devnet_kind", ["multicall3"], indirect=True)
WAD = 10**18
ZERO = "0x" + "0" * 40
# extensions.md: the table's types, plus the two of the service's own.
EVERY_TYPE = (*FEED_TYPES, "statusChanged", "eventRemoved")


def deploy(chain, name: str, *args: Any) -> str:
    artifact = chain_compile.load_build()["contracts"][name]
    factory = chain.w3.eth.contract(abi=artifact["abi"], bytecode=artifact["bytecode"])
    return send(chain, factory.constructor(*args), chain.account(0))["contractAddress"]


class Status:
    """`statusChanged` as the chain says it: after each refresh, each LAT's `paused()` and
    `arePricesStale()` at the refreshed block, against those at the refresh before."""

    def __init__(self, chain) -> None:
        self.chain = chain
        self.last = self.read()
        self.changes: dict[str, dict[str, Any]] = {}

    def read(self) -> dict[str, tuple[int, bool, bool]]:
        block = self.chain.w3.eth.block_number
        out = {}
        for manifest in self.chain.manifests:
            lt = self.chain.contract("LiquidToken", manifest["proxyAddress"])
            oracle = self.chain.contract(
                "TokenRegistryOracle", lt.functions.tokenRegistryOracle().call()
            )
            out[manifest["proxyAddress"]] = (
                block,
                lt.functions.paused().call(block_identifier=block),
                oracle.functions.arePricesStale().call(block_identifier=block),
            )
        return out

    def sync(self) -> None:
        now = self.read()
        call_command("lat_sync", "--no-progress")
        for lat, (block, paused, stale) in now.items():
            if self.last[lat][1:] != (paused, stale):
                self.changes[f"evt_status_{self.chain.w3.eth.chain_id}_{lat.lower()}_{block}"] = {
                    "lat": lat,
                    "chainId": self.chain.w3.eth.chain_id,
                    "paused": paused,
                    "pricesStale": stale,
                    "stateBlock": block,
                }
        self.last = now


def act(chain, status: Status) -> None:
    """Every type of the table happens on latETH (latORB's deposit emits the older `Deposit`),
    with a refresh after the pause and another while prices are stale."""
    eth, orb = chain.lat("latETH"), chain.lat("latORB")
    proxies = eth["contractDeployments"]["proxy"]
    lt = chain.contract("LiquidToken", eth["proxyAddress"])
    ltm = chain.contract("LiquidTokenManager", proxies["liquidTokenManager"]["address"])
    coordinator = chain.contract(
        "StakerNodeCoordinator", proxies["stakerNodeCoordinator"]["address"]
    )
    owner, a1, a7 = chain.account(0), chain.account(1), chain.account(7)
    token = eth["tokens"][0]["address"]

    make_deposits(chain.url, eth, 1, [token], [3 * WAD])  # deposit (AssetDeposited)
    make_deposits(chain.url, orb, 2, [orb["tokens"][0]["address"]], [WAD])  # deposit (Deposit)
    send(chain, lt.functions.transfer(a7, WAD), a1)  # transfer
    send(chain, lt.functions.pause(), owner)  # paused
    status.sync()  # statusChanged: paused

    send(chain, lt.functions.unpause(), owner)  # unpaused
    price = ltm.functions.getTokenInfo(token).call()[1]
    send(chain, ltm.functions.updatePrice(token, price + price // 100), owner)  # priceUpdated
    send(chain, ltm.functions.setVolatilityThreshold(token, 4 * 10**16), owner)  # its update
    # tokenAdded, tokenRemoved: a new token with its strategy and its price feed.
    new = deploy(chain, "TestERC20", "Webhook Test Token", "WHT", 18)
    strategy = deploy(chain, "Strategy", new, eth["eigenlayer"]["strategyManager"], WAD)
    feed = deploy(chain, "PriceFeed", 18, "WHT / ETH", WAD // 2)
    add = ltm.functions.addToken(new, 18, 0, strategy, 1, feed, 0, ZERO, b"\0" * 4)
    send(chain, add, owner)
    send(chain, ltm.functions.removeToken(new), owner)
    # nodeCreated, nodeDelegated; assetsStaked with assetsTransferred,
    # assetsDepositedToEigenlayer and the node's nodeAssetDeposited; nodeUndelegated.
    send(chain, coordinator.functions.createStakerNode(), owner)
    node_id = coordinator.functions.getStakerNodesCount().call() - 1
    delegate = ltm.functions.delegateNodes([node_id], [chain.account(4)], [(b"", 0)], [bytes(32)])
    send(chain, delegate, owner)
    send(chain, ltm.functions.stakeAssetsToNode(node_id, [token], [2 * WAD]), owner)
    send(chain, ltm.functions.undelegateNodes([node_id]), owner)
    max_nodes = coordinator.functions.maxNodes().call()
    send(chain, coordinator.functions.setMaxNodes(max_nodes + 2), owner)  # maxNodesUpdated
    # A day later every LAT's prices are stale.
    chain.rpc("evm_increaseTime", 86_401)
    chain.rpc("evm_mine")
    status.sync()  # statusChanged: unpaused and stale (latETH), stale (the others)

    # A deposit while stale: pricesRefreshed, tokenRateUpdated, globalPricesUpdated first.
    make_deposits(chain.url, eth, 3, [token], [WAD])
    # upgraded (the LAT's proxy), nodeImplementationChanged and upgraded (the node beacon).
    published = next(p for p in chain.published if p["proxyAddress"] == eth["proxyAddress"])
    proxy_admin = chain.contract("ProxyAdmin", published["proxyAdminAddress"])
    upgrade = proxy_admin.functions.upgrade(lt.address, deploy(chain, "LiquidToken"))
    send(chain, upgrade, proxy_admin.functions.owner().call())
    node = coordinator.functions.upgradeStakerNodeImplementation(deploy(chain, "StakerNode"))
    send(chain, node, owner)
    status.sync()  # statusChanged: prices fresh again (latETH)


def drain() -> None:
    dispatcher = Dispatcher(workers=8, per_endpoint=4)
    try:
        dispatcher.drain(timeout=60)
    finally:
        dispatcher.close()


def removal(chain, receipt, lat: str) -> tuple[str, dict[str, Any]]:
    """The orphaned transfer as web3 decodes its receipt, and the eventRemoved data naming it."""
    lt = chain.contract("LiquidToken", lat)
    (log,) = lt.events.Transfer().process_receipt(receipt, errors=DISCARD)
    tx_hash = hexstr(log["transactionHash"])
    block_hash = hexstr(log["blockHash"])
    removed_id = digest_id(chain.w3.eth.chain_id, block_hash, tx_hash, log["logIndex"])
    block = chain.w3.eth.get_block(log["blockNumber"])
    transfer = {
        "type": "transfer",
        "blockNumber": log["blockNumber"],
        "blockTimestamp": iso(block["timestamp"]),
        "transactionHash": tx_hash,
        "logIndex": log["logIndex"],
        "args": {k: str(v) if k == "value" else v for k, v in log["args"].items()},
        "lat": lat,
        "chainId": chain.w3.eth.chain_id,
    }
    return removed_id, transfer


@DEVNET
def test_every_type_reaches_a_subscribed_endpoint_once_signed(synced, keyed, receiver):
    chain = synced
    eth = chain.lat("latETH")
    drain()  # whatever the initial sync left to send goes to no endpoint
    every, named = receiver(), receiver()
    secrets = {
        every: register(keyed, every.url())["secret"],
        named: register(keyed, named.url(), types=list(EVERY_TYPE))["secret"],
    }
    registered_at = chain.w3.eth.block_number
    status = Status(chain)

    act(chain, status)
    drain()
    # A reorg deeper than the confirmations (0 on the devnet): a transfer delivered, then
    # orphaned by a branch at the same heights.
    lt = chain.contract("LiquidToken", eth["proxyAddress"])
    fork = chain.rpc("evm_snapshot")
    orphan = send(chain, lt.functions.transfer(chain.account(9), WAD), chain.account(1))
    orphan_id, orphan_data = removal(chain, orphan, eth["proxyAddress"])
    status.sync()
    drain()
    assert chain.rpc("evm_revert", fork)
    send(chain, lt.functions.transfer(chain.account(10), WAD // 3), chain.account(2))
    chain.rpc("anvil_mine", hex(3))
    status.sync()
    drain()

    want: dict[str, dict[str, Any]] = {
        **expected(chain, chain.manifests, registered_at),  # the canonical chain's logs
        orphan_id: orphan_data,
        **status.changes,
    }
    kinds = {i: d["type"] for i, d in want.items() if "type" in d}
    assert set(kinds.values()) == set(FEED_TYPES), set(FEED_TYPES) - set(kinds.values())
    assert any(d["pricesStale"] for d in status.changes.values())
    assert any(d["paused"] for d in status.changes.values())

    for server in (every, named):
        assert not [i for i, n in Counter(server.ids()).items() if n > 1]  # once per id
        bodies = {}
        for received in server.received:
            body = received.verify(secrets[server])  # raises unless the signature verifies
            assert body["id"] == received.id
            bodies[body["id"]] = body
        removals = [b for b in bodies.values() if b["type"] == "eventRemoved"]
        assert [b["data"]["removedId"] for b in removals] == [orphan_id]
        assert removals[0]["data"] == {
            "lat": eth["proxyAddress"],
            "chainId": chain.w3.eth.chain_id,
            "removedId": orphan_id,
            "removedType": "transfer",
            "blockNumber": orphan_data["blockNumber"],
            "logIndex": orphan_data["logIndex"],
            "transactionHash": orphan_data["transactionHash"],
        }
        got = {i: b["data"] for i, b in bodies.items() if b["type"] != "eventRemoved"}
        assert got == want
        for i, body in bodies.items():
            assert body["type"] == kinds.get(i, body["type"])
        assert {b["type"] for b in bodies.values()} == set(EVERY_TYPE)
