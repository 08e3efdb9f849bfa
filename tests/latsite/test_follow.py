"""The head follower on anvil: a deposit is served as soon as its block is confirmed, and a
second follower of the same chain waits on the lock."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from devchain.devnet import make_deposits
from lats.models import Lat
from sync.follow import FOLLOW_LOCK, Follower
from sync.refresh import STATE
from tests.chainreads import chain_deposits
from tests.following import Running
from tests.lockholder import Holder
from tests.served import served_deposits

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.chain]

WAD = 10**18
CHAIN_ID = 31337


def wait_for(predicate, timeout: float) -> float:
    """Seconds until `predicate()` held; fails past `timeout`."""
    started = time.monotonic()
    while not predicate():
        assert time.monotonic() - started < timeout, "timed out"
        time.sleep(0.05)
    return time.monotonic() - started


@pytest.fixture
def following(imported) -> Iterator[Follower]:
    with Running(Follower(CHAIN_ID, poll_interval=0.2)) as follower:
        wait_for(lambda: follower.seen is not None, 120)  # the first pass: backfill and state
        yield follower


def test_a_deposit_is_served_once_its_block_is_confirmed(following, chain, api):
    manifest = chain.lat("latETH")
    token = manifest["tokens"][0]["address"]
    # The first pass indexed every deposit the chain holds (read from the chain's logs).
    assert api.get("/metrics/deposits?take=1").json()["meta"]["total"] == len(chain_deposits(chain))
    done = make_deposits(chain.url, manifest, 12, [token], [3 * WAD])

    def served() -> bool:
        rows = api.get("/metrics/deposits?take=1").json()["data"]
        return bool(rows) and rows[0]["createdAtBlock"] == done["blockNumber"]

    # The freshness promise is 2 s; the bound here leaves room for a loaded test machine.
    wait_for(served, 5)
    row = api.get("/metrics/deposits?take=1").json()["data"][0]
    assert row["sender"] == chain.account(12)
    assert row["amount"] == str(3 * WAD)
    assert row["shares"] == str(done["shares"][0])
    # The LAT's state moved with it: total supply as the chain has it now.
    lat = chain.contract("LiquidToken", manifest["proxyAddress"])
    supply = lat.functions.totalSupply().call()
    wait_for(lambda: int(Lat.objects.get(symbol="latETH").total_supply) == supply, 5)


def test_a_second_follower_waits_for_the_first(imported):
    with Holder(FOLLOW_LOCK, CHAIN_ID) as holder:
        assert holder.acquired
        with Running(Follower(CHAIN_ID, poll_interval=0.1)) as waiting:
            time.sleep(1.0)
            assert waiting.seen is None  # it did nothing while another held the chain
            holder.release.set()
            holder.join(10)
            wait_for(lambda: waiting.seen is not None, 120)


def test_a_reorg_at_the_same_height_is_acted_on(imported):
    """evm_revert cuts the chain back (the deposits step finds the node behind its checkpoint:
    the head is not recorded), then other blocks are mined at the same heights: the follower
    acts on them although the head's number is one it has seen, and the orphan goes."""
    chain = imported
    manifest = chain.lat("latETH")
    follower = Follower(CHAIN_ID)
    follower.tick()  # the first pass
    fork = chain.rpc("evm_snapshot")
    orphan = make_deposits(chain.url, manifest, 12, [manifest["tokens"][0]["address"]], [WAD])
    assert any(r.get("new") == 1 for r in follower.tick())
    seen = (follower.seen, follower.seen_hash)
    assert seen[0] == orphan["blockNumber"]

    assert chain.rpc("evm_revert", fork)
    statuses = {r["status"] for r in follower.tick()}
    assert statuses == {"lagging"}
    assert (follower.seen, follower.seen_hash) == seen  # not recorded: tried again next poll
    while chain.w3.eth.block_number < orphan["blockNumber"]:
        chain.rpc("evm_mine")
    head = chain.w3.eth.get_block("latest")
    assert head["number"] == seen[0]
    assert "0x" + head["hash"].hex().removeprefix("0x") != seen[1]
    results = follower.tick()
    assert sum(r.get("removed", 0) for r in results) == 1
    assert follower.seen == seen[0]
    assert follower.seen_hash != seen[1]
    assert follower.tick() == []  # nothing new since


def test_a_pause_without_a_deposit_is_served_as_status(imported, api):
    """An event that is not a deposit (here the owner pauses the LAT) moves the LAT's state:
    the follower reads it again on the block that confirms it, not at the next beat."""
    from devchain.devnet import DEPLOYER

    chain = imported
    manifest = chain.lat("latETH")
    follower = Follower(CHAIN_ID)
    follower.tick()  # the first pass
    status = f"/lat/{manifest['proxyAddress']}/status"
    assert api.get(status).json()["data"]["paused"] is False
    lat = chain.contract("LiquidToken", manifest["proxyAddress"])
    owner = chain.w3.eth.accounts[DEPLOYER]
    chain.w3.eth.wait_for_transaction_receipt(lat.functions.pause().transact({"from": owner}))
    assert lat.functions.paused().call() is True
    lat_id = Lat.objects.get(proxy_address=manifest["proxyAddress"]).id
    results = follower.tick()
    state_steps = [r for r in results if r["job"] == STATE.job and r["lat"] == lat_id]
    assert [r["status"] for r in state_steps] == ["done"]
    assert api.get(status).json()["data"]["paused"] is True


def test_one_eth_getlogs_for_every_lat_of_the_chain(imported, api, monkeypatch):
    """Once every LAT is near the head, a new block is read with one eth_getLogs over the
    contracts of all of them (the node's own answer, handed out per LAT)."""
    from chain.activity import activity_topics
    from chain.gateway import Gateway
    from tests.chainreads import lat_emitters

    chain = imported
    reads: list[tuple[list[str], int, int]] = []
    real = Gateway._get_logs

    def recorded(self, address, topics, from_block, to_block):
        if topics == [activity_topics()]:
            reads.append((address, from_block, to_block))
        return real(self, address, topics, from_block, to_block)

    monkeypatch.setattr(Gateway, "_get_logs", recorded)
    follower = Follower(CHAIN_ID)
    follower.tick()  # the first pass: each LAT reads its own history
    lats = list(Lat.objects.filter(chain_id=CHAIN_ID))
    assert len(lats) >= 2
    reads.clear()
    before = chain.w3.eth.block_number
    made = []
    for symbol, account in (("latETH", 12), ("latBTC", 13)):
        manifest = chain.lat(symbol)
        token = manifest["tokens"][0]["address"]
        made.append(make_deposits(chain.url, manifest, account, [token], [10**8]))
    follower.tick()
    assert len(reads) == 1
    addresses, first, last = reads[0]
    # Every LAT's proxies, node beacon and staker nodes, as the chain has them.
    expected = [
        address
        for lat in lats
        for emitters in lat_emitters(chain, chain.lat(lat.symbol)).values()
        for address, _ in emitters
    ]
    assert sorted(a.lower() for a in set(addresses)) == sorted({a.lower() for a in expected})
    assert len(addresses) == len(set(addresses))
    # From the first block no LAT had indexed to the head (no confirmations on the devnet).
    assert (first, last) == (before + 1, chain.w3.eth.block_number)
    served = {row["transactionHash"] for row in api.get("/metrics/deposits").json()["data"]}
    assert {d["txHash"] for d in made} <= served
    assert served_deposits(api) == chain_deposits(chain)


def last_block_served(api) -> int | None:
    rows = api.get("/metrics/deposits?take=1").json()["data"]
    return rows[0]["createdAtBlock"] if rows else None


def test_a_new_head_over_websocket_wakes_the_follower(imported, api, settings):
    """With WS_URL_<chainId> set (anvil answers WebSocket on its HTTP port), a deposit is served
    at once although the follower's poll interval is 30 s."""
    chain = imported
    settings.WS_URLS = {CHAIN_ID: chain.url.replace("http://", "ws://")}
    manifest = chain.lat("latETH")
    with Running(Follower(CHAIN_ID, poll_interval=30)) as follower:
        wait_for(lambda: follower.seen is not None, 120)
        time.sleep(0.5)  # the subscription is up (it wakes the follower once when it is)
        done = make_deposits(chain.url, manifest, 12, [manifest["tokens"][0]["address"]], [WAD])
        seconds = wait_for(lambda: last_block_served(api) == done["blockNumber"], 10)
    assert seconds < 10  # a poll would have come only after 30 s


def test_without_websocket_the_follower_polls(imported, api, settings, caplog):
    """A WebSocket URL that does not answer leaves the follower polling at its interval."""
    from devchain.anvil import free_port

    chain = imported
    settings.WS_URLS = {CHAIN_ID: f"ws://127.0.0.1:{free_port()}"}
    manifest = chain.lat("latETH")
    with Running(Follower(CHAIN_ID, poll_interval=0.2)) as follower:
        wait_for(lambda: follower.seen is not None, 120)
        done = make_deposits(chain.url, manifest, 12, [manifest["tokens"][0]["address"]], [WAD])
        wait_for(lambda: last_block_served(api) == done["blockNumber"], 10)
    assert "new-head subscription failed" in caplog.text


def test_a_quiet_chain_longer_than_the_lease_keeps_the_role(imported, chain, settings, api):
    """No block for several leases: the follower's work session is kept from idling out (the
    server would end it at FOLLOWER_LEASE_SECONDS, as it ends a frozen follower's), and the next
    deposit is indexed by the same follower, which never lost its role."""
    settings.FOLLOWER_LEASE_SECONDS = 1.2
    manifest = chain.lat("latETH")
    with Running(Follower(CHAIN_ID, poll_interval=0.2)) as follower:
        wait_for(lambda: follower.seen is not None, 120)
        time.sleep(4)  # more than three leases without a block
        done = make_deposits(chain.url, manifest, 12, [manifest["tokens"][0]["address"]], [WAD])

        def listed() -> bool:
            rows = api.get("/metrics/deposits?take=1").json()["data"]
            return bool(rows) and rows[0]["transactionHash"] == done["txHash"]

        wait_for(listed, 30)
        assert follower._held is not None  # still the holder: the role was never lost
