"""Holders, the event feed, wallet positions and the LAT status, on anvil.

A scenario of transfers between holders, burns, a pause and unpause, a price update, a new
staker node and its delegation; then, after indexing, every value is compared with what plain
web3 reads from the chain (`balanceOf`, `get_logs`, the oracle's views), never with the
service's tables. A reorg made with evm_snapshot/evm_revert must leave the same equalities.
"""

from __future__ import annotations

import time
from collections import Counter
from datetime import UTC, datetime
from typing import Any

import pytest
from django.core.management import call_command

from activity import indexer as services
from activity import selectors as activity_selectors
from deposits.models import DepositCheckpoint, Holder, HolderBucket, HolderTally
from lats.models import Lat
from operators.models import StakerNode
from tests.chainreads import chain_balances, chain_events
from tests.deposits.test_holder_rank import key_by_digits
from tests.served import served_events, served_holders

pytestmark = [pytest.mark.django_db, pytest.mark.chain]

WAD = 10**18


def send(chain, call, sender: str) -> dict[str, Any]:
    receipt = chain.w3.eth.wait_for_transaction_receipt(call.transact({"from": sender}))
    assert receipt["status"] == 1
    return receipt


def sync() -> None:
    call_command("lat_sync", "--no-progress")


def iso(timestamp: int) -> str:
    return datetime.fromtimestamp(timestamp, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def expected_feed(chain, manifest, block: int) -> list[dict[str, Any]]:
    return [
        {**e, "blockTimestamp": iso(e["blockTimestamp"])}
        for e in chain_events(chain, manifest, block)
    ]


def indexed_block(manifest) -> int:
    return DepositCheckpoint.objects.get(lat__proxy_address=manifest["proxyAddress"]).block_number


def assert_holders_equal_the_chain(chain, api, manifest) -> None:
    block = indexed_block(manifest)
    balances = chain_balances(chain, manifest, block)
    holding = {a: b for a, b in balances.items() if b > 0}
    stored = {
        h.address: int(h.balance)
        for h in Holder.objects.filter(lat__proxy_address=manifest["proxyAddress"])
    }
    # Every address ever credited has a row, with balanceOf at the indexed block.
    assert stored == {a.lower(): b for a, b in balances.items()}
    served, total = served_holders(api, manifest["proxyAddress"])
    assert total == len(holding)
    assert served == sorted(holding.items(), key=lambda item: (-item[1], item[0].lower()))
    tally = HolderTally.objects.get(lat__proxy_address=manifest["proxyAddress"])
    assert (tally.holders, tally.ever) == (len(holding), len(balances))
    assert_deep_pages_equal_the_chain(api, manifest, holding)


def assert_deep_pages_equal_the_chain(api, manifest, holding: dict[str, int]) -> None:
    """Pages at every skip through the rank buckets (deposits.models.HolderBucket), whose
    counts equal those of balanceOf at the indexed block."""
    lat = manifest["proxyAddress"]
    order = sorted(holding.items(), key=lambda item: (-item[1], item[0].lower()))
    buckets = dict(
        HolderBucket.objects.filter(lat__proxy_address=lat).values_list("key", "holders")
    )
    assert buckets == dict(Counter(key_by_digits(b) for b in holding.values()))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(activity_selectors, "SHALLOW_SKIP", 0)
        for skip in range(len(order) + 2):
            body = api.get(f"/lat/{lat}/holders", {"skip": skip, "take": 3}).json()
            served = [(row["address"], int(row["balance"])) for row in body["data"]]
            assert served == order[skip : skip + 3]
            assert body["meta"]["total"] == len(order)


def act(chain, manifest) -> dict[str, Any]:
    """Transfers between holders (one to a new holder who passes some on), two burns (one
    empties a balance), a pause and unpause, a price update, a new node and its delegation."""
    lt = chain.contract("LiquidToken", manifest["proxyAddress"])
    proxies = manifest["contractDeployments"]["proxy"]
    ltm = chain.contract("LiquidTokenManager", proxies["liquidTokenManager"]["address"])
    coordinator = chain.contract(
        "StakerNodeCoordinator", proxies["stakerNodeCoordinator"]["address"]
    )
    owner, a1, a2, a7, a8 = (chain.account(i) for i in (0, 1, 2, 7, 8))
    send(chain, lt.functions.transfer(a7, WAD), a1)
    send(chain, lt.functions.transfer(a8, 4 * WAD // 10), a7)
    send(chain, lt.functions.burn(WAD // 2), a2)
    send(chain, lt.functions.burn(4 * WAD // 10), a8)
    send(chain, lt.functions.pause(), owner)
    paused_at = chain.w3.eth.block_number
    send(chain, lt.functions.unpause(), owner)
    token = manifest["tokens"][0]["address"]
    price = ltm.functions.getTokenInfo(token).call()[1]
    send(chain, ltm.functions.updatePrice(token, price + price // 100), owner)
    send(chain, coordinator.functions.createStakerNode(), owner)
    node_id = coordinator.functions.getStakerNodesCount().call() - 1
    delegate = ltm.functions.delegateNodes([node_id], [chain.account(4)], [(b"", 0)], [bytes(32)])
    send(chain, delegate, owner)
    return {"paused_at": paused_at, "node_id": node_id}


def test_holders_events_and_wallets_equal_the_chain(synced, api):
    chain, manifest = synced, synced.lat("latETH")
    lat = manifest["proxyAddress"]
    done = act(chain, manifest)
    sync()
    block = indexed_block(manifest)
    assert block == chain.w3.eth.block_number  # 0 confirmations on the devnet
    assert_holders_equal_the_chain(chain, api, manifest)
    # a8 received 0.4 LAT and burned it all: credited once, holds nothing, not a holder.
    a8 = chain.account(8)
    assert Holder.objects.get(address=a8.lower(), lat__proxy_address=lat).balance == 0
    assert a8 not in [a for a, _ in served_holders(api, lat)[0]]

    feed = expected_feed(chain, manifest, block)
    kinds = {e["type"] for e in feed}
    assert {"deposit", "transfer", "paused", "unpaused", "priceUpdated"} <= kinds
    assert {"nodeCreated", "nodeDelegated", "tokenAdded"} <= kinds
    assert served_events(api, lat) == feed
    node_events = [e for e in feed if e["type"] in ("nodeCreated", "nodeDelegated")]
    assert {e["args"]["nodeId"] for e in node_events[:2]} == {done["node_id"]}

    # Filters: types and an inclusive block range.
    low, high = done["paused_at"] - 3, done["paused_at"] + 1
    wanted = [
        e
        for e in feed
        if e["type"] in ("transfer", "paused", "unpaused") and low <= e["blockNumber"] <= high
    ]
    assert len(wanted) >= 3
    served = served_events(
        api, lat, take=2, type="transfer,paused,unpaused", fromBlock=low, toBlock=high
    )
    assert served == wanted


def test_wallet_positions_are_valued_by_hand(synced, api):
    chain, manifest = synced, synced.lat("latETH")
    lt = chain.contract("LiquidToken", manifest["proxyAddress"])
    a1, a7 = chain.account(1), chain.account(7)
    send(chain, lt.functions.transfer(a7, 3 * WAD // 10), a1)
    sync()
    total_assets = lt.functions.totalAssets().call()
    total_supply = lt.functions.totalSupply().call()
    deposits_to_a1 = {
        manifest["proxyAddress"]: len(
            lt.events.AssetDeposited.get_logs(
                from_block=manifest["deploymentBlock"], argument_filters={"receiver": a1}
            )
        )
    }
    for wallet in (a1, a7):
        body = api.get(f"/wallets/{wallet.lower()}").json()["data"]
        assert body["address"] == wallet
        position = next(p for p in body["positions"] if p["latAddress"] == manifest["proxyAddress"])
        balance = lt.functions.balanceOf(wallet).call()
        assert position["balance"] == str(balance)
        # An ETH LAT: the unit of account is ETH, so value = balance * assets / supply.
        assert position["valueEth"] == pytest.approx(
            balance * total_assets / total_supply / WAD, rel=1e-12
        )
        assert position["deposits"] == deposits_to_a1.get(manifest["proxyAddress"], 0) * (
            wallet == a1
        )
        assert position["chainId"] == chain.w3.eth.chain_id
        assert position["latSymbol"] == "latETH"
    order = [
        (p["chainId"], p["latAddress"].lower())
        for p in api.get(f"/wallets/{a1}").json()["data"]["positions"]
    ]
    assert order == sorted(order)
    never = chain.account(17)
    assert api.get(f"/wallets/{never}").json() == {"data": {"address": never, "positions": []}}


def test_status_follows_pause_and_prices(synced, api):
    chain, manifest = synced, synced.lat("latETH")
    lat = manifest["proxyAddress"]
    lt = chain.contract("LiquidToken", lat)
    oracle = chain.contract("TokenRegistryOracle", lt.functions.tokenRegistryOracle().call())
    send(chain, lt.functions.pause(), chain.account(0))
    sync()
    head = chain.w3.eth.block_number
    status = api.get(f"/lat/{lat}/status").json()["data"]
    assert status["paused"] is True
    assert status["pricesStale"] is oracle.functions.arePricesStale().call()
    assert status["lastPriceUpdate"] == iso(oracle.functions.lastPriceUpdate().call())
    assert (status["stateBlock"], status["indexedBlock"], status["chainHead"]) == (head,) * 3
    assert (status["lagBlocks"], status["lagSeconds"]) == (0, 0)
    assert status["lastSuccessAt"] is not None

    send(chain, lt.functions.unpause(), chain.account(0))
    # A year later, the prices are stale (the devnet oracle allows a day).
    chain.rpc("evm_increaseTime", 365 * 86400)
    chain.rpc("evm_mine")
    sync()
    status = api.get(f"/lat/{lat}/status").json()["data"]
    assert status["paused"] is False
    assert oracle.functions.arePricesStale().call() is True
    assert status["pricesStale"] is True


def test_cursor_pages_have_no_gap_or_repeat_while_events_arrive(synced, api):
    chain, manifest = synced, synced.lat("latETH")
    lat = manifest["proxyAddress"]
    lt = chain.contract("LiquidToken", lat)
    before = expected_feed(chain, manifest, indexed_block(manifest))
    first = api.get(f"/lat/{lat}/events", {"take": 4}).json()
    assert first["data"] == before[:4]
    for i in range(3):  # new events at the head, between two pages
        send(chain, lt.functions.transfer(chain.account(9), WAD // 10), chain.account(1 + i))
    sync()
    rest = served_events(api, lat, take=4, cursor=first["meta"]["next"])
    assert first["data"] + rest == before
    now = expected_feed(chain, manifest, indexed_block(manifest))
    assert now[3:] == before
    assert len(now) == len(before) + 3
    assert api.get(f"/lat/{lat}/events", {"take": 3}).json()["data"] == now[:3]


def test_reorg_leaves_holders_and_events_equal_to_the_canonical_chain(synced, api):
    chain, manifest = synced, synced.lat("latETH")
    lat = manifest["proxyAddress"]
    lt = chain.contract("LiquidToken", lat)
    a1, a2, a3, a9, a10 = (chain.account(i) for i in (1, 2, 3, 9, 10))
    fork = chain.rpc("evm_snapshot")
    orphan = send(chain, lt.functions.transfer(a9, WAD), a1)
    send(chain, lt.functions.burn(WAD // 4), a3)
    sync()
    assert a9 in dict(served_holders(api, lat)[0])
    assert any(
        e["transactionHash"] == orphan["transactionHash"].to_0x_hex()
        for e in served_events(api, lat, take=50)
    )

    assert chain.rpc("evm_revert", fork)
    send(chain, lt.functions.transfer(a10, WAD // 3), a2)  # the new branch, at the same heights
    chain.rpc("anvil_mine", hex(3))
    sync()
    assert_holders_equal_the_chain(chain, api, manifest)
    assert not Holder.objects.filter(address=a9.lower(), lat__proxy_address=lat).exists()
    assert served_events(api, lat, take=50) == expected_feed(
        chain, manifest, indexed_block(manifest)
    )


def test_ranges_read_ahead_are_stored_together_as_the_chain_has_them(synced, api, settings):
    """One-block ranges, read ahead while a slow first store runs, are stored together (one
    transaction, the last range's checkpoint): a holder credited in one range and debited in
    the next, or emptied by a burn, ends as balanceOf says, and the feed as get_logs says."""
    chain, manifest = synced, synced.lat("latETH")
    act(chain, manifest)
    settings.LOG_BLOCK_RANGE = 1
    stored_blocks: list[int] = []
    store = services._store_range

    def slow_first(lat, ready, **options):
        if lat.proxy_address == manifest["proxyAddress"]:
            if not stored_blocks:
                time.sleep(0.5)  # meanwhile the next ranges are read ahead
            stored_blocks.append(ready.read.last - ready.read.first + 1)
        return store(lat, ready, **options)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(services, "_store_range", slow_first)
        sync()
    assert stored_blocks[0] == 1, stored_blocks
    assert max(stored_blocks) > 1, stored_blocks
    assert_holders_equal_the_chain(chain, api, manifest)
    lat = manifest["proxyAddress"]
    assert served_events(api, lat) == expected_feed(chain, manifest, indexed_block(manifest))


ZERO = "0x" + "0" * 40
# The types extensions.md's table gained with upstream's events.
UPSTREAM_TYPES = {
    "pricesRefreshed",
    "assetsTransferred",
    "assetsDepositedToEigenlayer",
    "volatilityThresholdUpdated",
    "maxNodesUpdated",
    "nodeImplementationChanged",
    "nodeUndelegated",
    "nodeAssetDeposited",
    "tokenRateUpdated",
    "globalPricesUpdated",
    "upgraded",
}


def deploy(chain, name: str) -> str:
    """A new implementation of one of the devnet's contracts."""
    from devchain import compile as chain_compile

    artifact = chain_compile.load_build()["contracts"][name]
    factory = chain.w3.eth.contract(abi=artifact["abi"], bytecode=artifact["bytecode"])
    return send(chain, factory.constructor(), chain.account(0))["contractAddress"]


def act_upstream(chain, manifest) -> dict[str, Any]:
    """Every event upstream emits beyond the first table: a deposit while prices are stale,
    a node created, delegated and staked to in one indexed range (its events before the
    service stores it), a stored node undelegated, a threshold and max-nodes update, an
    upgrade of the LAT's proxy and of the node beacon."""
    proxies = manifest["contractDeployments"]["proxy"]
    lt = chain.contract("LiquidToken", manifest["proxyAddress"])
    ltm = chain.contract("LiquidTokenManager", proxies["liquidTokenManager"]["address"])
    coordinator = chain.contract(
        "StakerNodeCoordinator", proxies["stakerNodeCoordinator"]["address"]
    )
    oracle = chain.contract("TokenRegistryOracle", proxies["tokenRegistryOracle"]["address"])
    owner, sender = chain.account(0), chain.account(11)
    token_address = manifest["tokens"][0]["address"]
    token = chain.contract("TestERC20", token_address)
    amount = 2 * 10 ** token.functions.decimals().call()

    # A deposit while prices are stale: the deposit refreshes every price first.
    chain.rpc("evm_increaseTime", 86_401)
    chain.rpc("evm_mine")
    assert oracle.functions.arePricesStale().call() is True
    send(chain, token.functions.mint(sender, amount), sender)
    send(chain, token.functions.approve(lt.address, amount), sender)
    send(chain, lt.functions.deposit([token_address], [amount], sender), sender)

    # A stored node that is delegated, undelegated.
    nodes = coordinator.functions.getAllNodes().call()
    delegated = [
        chain.contract("StakerNode", n).functions.getId().call()
        for n in nodes
        if chain.contract("StakerNode", n).functions.getOperatorDelegation().call() != ZERO
    ]
    send(chain, ltm.functions.undelegateNodes(delegated[:1]), owner)

    # A new node, delegated and staked to.
    send(chain, coordinator.functions.createStakerNode(), owner)
    node_id = coordinator.functions.getStakerNodesCount().call() - 1
    delegate = ltm.functions.delegateNodes([node_id], [chain.account(4)], [(b"", 0)], [bytes(32)])
    send(chain, delegate, owner)
    send(chain, ltm.functions.stakeAssetsToNode(node_id, [token_address], [amount]), owner)

    send(chain, ltm.functions.setVolatilityThreshold(token_address, 5 * 10**16), owner)
    max_nodes = coordinator.functions.maxNodes().call()
    send(chain, coordinator.functions.setMaxNodes(max_nodes + 3), owner)

    # Upgrades: the LAT's proxy (through its ProxyAdmin) and the staker node beacon.
    published = next(p for p in chain.published if p["proxyAddress"] == manifest["proxyAddress"])
    proxy_admin = chain.contract("ProxyAdmin", published["proxyAdminAddress"])
    admin_owner = proxy_admin.functions.owner().call()
    send(
        chain, proxy_admin.functions.upgrade(lt.address, deploy(chain, "LiquidToken")), admin_owner
    )
    node_implementation = deploy(chain, "StakerNode")
    send(chain, coordinator.functions.upgradeStakerNodeImplementation(node_implementation), owner)
    return {
        "undelegated": delegated[0],
        "node_id": node_id,
        "node_implementation": node_implementation,
    }


def test_upstream_events_equal_the_chain(synced, api, monkeypatch):
    from chain.activity import activity_topics
    from chain.gateway import Gateway

    chain, manifest = synced, synced.lat("latETH")
    reads: list[list[str]] = []
    real = Gateway._get_logs

    def recorded(self, address, topics, from_block, to_block):
        if topics == [activity_topics()]:
            reads.append(address)
        return real(self, address, topics, from_block, to_block)

    lat = manifest["proxyAddress"]
    done = act_upstream(chain, manifest)
    # The events first, before the state step stores the new node: its logs are found from
    # its NodeCreated in the same range.
    record = Lat.objects.get(proxy_address=lat)
    assert not StakerNode.objects.filter(lat=record, node_id=done["node_id"]).exists()
    monkeypatch.setattr(Gateway, "_get_logs", recorded)
    services.deposit_index(lat=record)
    monkeypatch.undo()
    # One eth_getLogs over the LAT's contracts and stored nodes, one more over the new node
    # only (no read per log).
    new_node = (
        chain.contract(
            "StakerNodeCoordinator",
            manifest["contractDeployments"]["proxy"]["stakerNodeCoordinator"]["address"],
        )
        .functions.getNodeById(done["node_id"])
        .call()
    )
    assert len(reads) == 2
    assert new_node.lower() not in {a.lower() for a in reads[0]}
    assert [a.lower() for a in reads[1]] == [new_node.lower()]
    assert not StakerNode.objects.filter(lat=record, node_id=done["node_id"]).exists()
    block = indexed_block(manifest)
    assert block == chain.w3.eth.block_number
    feed = expected_feed(chain, manifest, block)
    kinds = {e["type"] for e in feed}
    assert kinds >= UPSTREAM_TYPES
    assert served_events(api, lat, take=50) == feed

    # What each new kind says, beyond the equality with web3's logs.
    upgraded = {e["args"]["contract"] for e in feed if e["type"] == "upgraded"}
    assert {"liquidToken", "stakerNode"} <= upgraded
    beacon_upgrade = next(
        e for e in feed if e["type"] == "upgraded" and e["args"]["contract"] == "stakerNode"
    )
    assert beacon_upgrade["args"]["implementation"] == done["node_implementation"]
    (undelegated,) = [e for e in feed if e["type"] == "nodeUndelegated"]
    assert undelegated["args"]["nodeId"] == done["undelegated"]
    new_node = next(e for e in feed if e["type"] == "nodeAssetDeposited")
    assert new_node["args"]["nodeId"] == done["node_id"]
    refreshed = next(e for e in feed if e["type"] == "globalPricesUpdated")
    assert refreshed["args"]["timestamp"] == iso(
        chain.w3.eth.get_block(refreshed["blockNumber"])["timestamp"]
    )

    # The type filter takes the new types.
    wanted = [e for e in feed if e["type"] in ("upgraded", "nodeUndelegated", "tokenRateUpdated")]
    served = served_events(api, lat, take=3, type="upgraded,nodeUndelegated,tokenRateUpdated")
    assert served == wanted
    assert api.get(f"/lat/{lat}/events", {"type": "delegatedToOperator"}).status_code == 422
