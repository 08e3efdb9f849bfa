"""The gateway's two routes for batched reads, on both devnets.

Where Multicall3 has code the gateway reads through `aggregate3`; elsewhere through JSON-RPC
batches of plain `eth_call`s. Either way the typed results must equal what plain web3 contract
calls give one by one at the same block; the tests compute those independently and count what
the gateway sends through a small recording provider (a real HTTP provider to the real anvil).
"""

from __future__ import annotations

import socket
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import pytest
from web3 import HTTPProvider, Web3

from chain.abi import function
from chain.errors import ChainCallReverted, ChainUnavailable
from chain.gateway import Gateway, gateway_for, gateway_for_url
from chain.results import Block, LatState, NodeAssetState, NodeState, TokenState
from devchain.devnet import MULTICALL3_ADDRESS, install_multicall3, make_deposits

if TYPE_CHECKING:
    from tests.conftest import Chain

pytestmark = pytest.mark.chain

BEACON = "0xbeaC0eeEeeeeEEeEeEEEEeeEEeEeeeEeeEEBEaC0"
NO_CODE = "0x000000000000000000000000000000000000dEaD"


class RecordingProvider(HTTPProvider):
    """An HTTP provider that records every request it sends, and the size of each batch."""

    def __init__(self, url: str) -> None:
        super().__init__(url, request_kwargs={"timeout": 30}, exception_retry_configuration=None)
        self.sent: list[tuple[str, list[Any]]] = []
        self.batches: list[int] = []
        self._lock = threading.Lock()

    def make_request(self, method, params):
        with self._lock:
            self.sent.append((method, params))
        return super().make_request(method, params)

    def make_batch_request(self, batch_requests):
        with self._lock:
            self.batches.append(len(batch_requests))
            self.sent.extend(batch_requests)
        return super().make_batch_request(batch_requests)

    def count(self, method: str, *, to: str | None = None) -> int:
        return sum(
            1
            for m, params in self.sent
            if m == method and (to is None or _target(m, params).lower() == to.lower())
        )


def _target(method: str, params: list[Any]) -> str:
    if method == "eth_call":
        return params[0]["to"]
    if method == "eth_getCode":
        return params[0]
    return ""


def recording_gateway(url: str, **options: Any) -> tuple[Gateway, RecordingProvider]:
    provider = RecordingProvider(url)
    return Gateway(Web3(provider), **options), provider


def spy(monkeypatch: pytest.MonkeyPatch, gateway: Gateway) -> list[tuple[str, list[Any]]]:
    """Record what an existing gateway sends (undone after the test)."""
    provider, sent = gateway.w3.provider, []
    one, many = provider.make_request, provider.make_batch_request

    def make_request(method, params):
        sent.append((method, params))
        return one(method, params)

    def make_batch_request(batch_requests):
        sent.extend(batch_requests)
        return many(batch_requests)

    monkeypatch.setattr(provider, "make_request", make_request)
    monkeypatch.setattr(provider, "make_batch_request", make_batch_request)
    return sent


# --- the expected values: plain web3 contract calls, one by one, at the block -----------------


def addresses(manifest: dict[str, Any]) -> dict[str, str]:
    proxies = manifest["contractDeployments"]["proxy"]
    return {
        "proxy": manifest["proxyAddress"],
        "manager": proxies["liquidTokenManager"]["address"],
        "coordinator": proxies["stakerNodeCoordinator"]["address"],
    }


def expected_lat(chain: Chain, manifest: dict[str, Any], block: Block) -> LatState:
    at = {"block_identifier": block.number}
    a = addresses(manifest)
    lt = chain.contract("LiquidToken", a["proxy"]).functions
    ltm = chain.contract("LiquidTokenManager", a["manager"]).functions
    coordinator = chain.contract("StakerNodeCoordinator", a["coordinator"]).functions
    tokens = [Web3.to_checksum_address(t) for t in ltm.getSupportedTokens().call(**at)]
    balances = lt.balanceAssets(tokens).call(**at)
    queued = lt.balanceQueuedAssets(tokens).call(**at)
    oracle_address = lt.tokenRegistryOracle().call(**at)
    oracle = chain.contract("TokenRegistryOracle", oracle_address).functions
    states = []
    for i, token in enumerate(tokens):
        erc20 = chain.contract("TestERC20", token).functions
        decimals, price, threshold = ltm.getTokenInfo(token).call(**at)
        states.append(
            TokenState(
                address=token,
                symbol=erc20.symbol().call(**at),
                name=erc20.name().call(**at),
                decimals=decimals,
                price_per_unit=price,
                volatility_threshold=threshold,
                strategy=ltm.getTokenStrategy(token).call(**at),
                balance=balances[i],
                queued_balance=queued[i],
            )
        )
    return LatState(
        block=block,
        name=lt.name().call(**at),
        symbol=lt.symbol().call(**at),
        total_assets=lt.totalAssets().call(**at),
        total_supply=lt.totalSupply().call(**at),
        paused=lt.paused().call(**at),
        max_nodes=coordinator.maxNodes().call(**at),
        tokens=tuple(states),
        nodes=tuple(coordinator.getAllNodes().call(**at)),
        prices_stale=oracle.arePricesStale().call(**at),
        last_price_update=oracle.lastPriceUpdate().call(**at),
        oracle=oracle_address,
    )


def strategies_of(manifest: dict[str, Any]) -> list[tuple[str, str]]:
    return [(t["address"], t["strategy"]) for t in manifest["tokens"]]


def expected_nodes(chain: Chain, manifest: dict[str, Any], block: Block) -> list[NodeState]:
    at = {"block_identifier": block.number}
    coordinator = chain.contract("StakerNodeCoordinator", addresses(manifest)["coordinator"])
    dm = chain.contract("DelegationManager", manifest["eigenlayer"]["delegationManager"])
    strategies = strategies_of(manifest)
    out = []
    for node in coordinator.functions.getAllNodes().call(**at):
        staker_node = chain.contract("StakerNode", node).functions
        withdrawable, _ = dm.functions.getWithdrawableShares(node, [s for _, s in strategies]).call(
            **at
        )
        assets = []
        for (token, strategy), shares in zip(strategies, withdrawable, strict=True):
            if not shares:
                continue
            staked = (
                shares
                if strategy == BEACON
                else chain.contract("Strategy", strategy)
                .functions.sharesToUnderlyingView(shares)
                .call(**at)
            )
            assets.append(NodeAssetState(token, strategy, shares, staked))
        out.append(
            NodeState(
                address=node,
                node_id=staker_node.getId().call(**at),
                operator=staker_node.getOperatorDelegation().call(**at),
                assets=tuple(assets),
            )
        )
    return out


def read_lat(gateway: Gateway, manifest: dict[str, Any], block: Block) -> LatState:
    return gateway.read_lat(**addresses(manifest), block=block)


def read_nodes(gateway: Gateway, manifest: dict[str, Any], block: Block) -> list[NodeState]:
    nodes = read_lat(gateway, manifest, block).nodes
    return gateway.read_nodes(
        nodes=nodes,
        strategies=strategies_of(manifest),
        delegation_manager=manifest["eigenlayer"]["delegationManager"],
        block=block,
    )


# --- the routes ---------------------------------------------------------------------------


def test_lat_and_node_state_equal_one_by_one_reads(chain: Chain) -> None:
    gateway, provider = recording_gateway(chain.url)
    block = gateway.head()
    for manifest in chain.manifests:
        state = read_lat(gateway, manifest, block)
        assert state == expected_lat(chain, manifest, block)
        assert state.tokens
        assert state.nodes
        assert read_nodes(gateway, manifest, block) == expected_nodes(chain, manifest, block)
    calls = provider.count("eth_call")
    assert provider.count("eth_getCode", to=MULTICALL3_ADDRESS) == 1
    if chain.multicall:  # aggregate3: each batched read is one eth_call to Multicall3
        assert gateway.multicall_available()
        assert calls == provider.count("eth_call", to=MULTICALL3_ADDRESS) > 0
        assert provider.batches == []
    else:  # plain eth_calls in JSON-RPC batches, none to Multicall3's address
        assert not gateway.multicall_available()
        assert provider.count("eth_call", to=MULTICALL3_ADDRESS) == 0
        assert calls == sum(provider.batches) > 3 * len(chain.manifests)


def test_reads_are_pinned_to_the_block_on_both_routes(chain: Chain) -> None:
    """A deposit after the pinned block changes nothing in what is read at that block."""
    manifest = chain.lat("latETH")
    helper, _ = recording_gateway(chain.url)
    plain, _ = recording_gateway(chain.url, multicall=None)
    block = helper.head()
    before = expected_lat(chain, manifest, block)
    token = manifest["tokens"][0]["address"]
    make_deposits(chain.url, manifest, 1, [token], [3 * 10**18])
    after = expected_lat(chain, manifest, helper.head())
    assert after.total_supply > before.total_supply  # the deposit did change the state
    assert read_lat(helper, manifest, block) == before
    assert read_lat(plain, manifest, block) == before


def test_operator_splits_and_price_feed_equal_one_by_one_reads(chain: Chain) -> None:
    gateway, _ = recording_gateway(chain.url)
    block = gateway.head()
    at = {"block_identifier": block.number}
    orb = chain.lat("latORB")
    rc_address = orb["eigenlayer"]["rewardsCoordinator"]
    rc = chain.contract("RewardsCoordinator", rc_address).functions
    pairs = [(chain.account(op), orb["avsAddress"]) for op in (4, 5, 6)]
    splits = gateway.operator_splits(rewards_coordinator=rc_address, pairs=pairs, block=block)
    assert splits == {pair: rc.getOperatorAVSSplit(*pair).call(**at) for pair in pairs}
    assert splits[pairs[2]] == 2500  # the devnet sets operator 6's split for latORB
    feed_address = orb["priceFeeds"][orb["tokens"][0]["address"]]
    feed = chain.contract("PriceFeed", feed_address).functions
    expected = (feed.latestRoundData().call(**at)[1], feed.decimals().call(**at))
    assert gateway.price_feed(feed=feed_address, block=block) == expected == (420 * 10**12, 18)


# --- the code check ------------------------------------------------------------------------


def test_the_code_check_happens_once_per_gateway(chain: Chain) -> None:
    manifest = chain.lat("latBTC")
    gateway, provider = recording_gateway(chain.url)
    block = gateway.head()
    with ThreadPoolExecutor(8) as pool:  # concurrent first reads ask once between them
        states = list(pool.map(lambda _: read_lat(gateway, manifest, block), range(16)))
    assert set(states) == {expected_lat(chain, manifest, block)}
    read_nodes(gateway, manifest, block)
    assert provider.count("eth_getCode") == 1
    assert provider.count("eth_getCode", to=MULTICALL3_ADDRESS) == 1
    other, other_provider = recording_gateway(chain.url)  # a gateway of its own asks again
    read_lat(other, manifest, block)
    assert other_provider.count("eth_getCode") == 1
    off, off_provider = recording_gateway(chain.url, multicall="")  # off: never asks
    read_lat(off, manifest, block)
    assert off_provider.count("eth_getCode") == 0


def test_a_remembered_answer_that_went_stale_costs_no_correctness(chain: Chain) -> None:
    """The multicall devnet loses Multicall3 after the check, the plain one gains it: reads
    stay right (the first falls back to plain eth_calls where aggregate3 answers nothing)."""
    manifest = chain.lat("latETH")
    gateway, provider = recording_gateway(chain.url)
    assert gateway.multicall_available() is chain.multicall
    if chain.multicall:
        chain.rpc("anvil_setCode", MULTICALL3_ADDRESS, "0x")
    else:
        install_multicall3(chain.w3)
    block = gateway.head()
    assert read_lat(gateway, manifest, block) == expected_lat(chain, manifest, block)
    assert provider.count("eth_getCode") == 1


# --- settings ------------------------------------------------------------------------------


def test_an_empty_address_setting_turns_multicall3_off(chain: Chain, settings, monkeypatch):
    chain_id = chain.w3.eth.chain_id
    settings.RPC_URL, settings.RPC_URLS = chain.url, {}
    settings.MULTICALL3_ADDRESSES = {chain_id: ""}  # MULTICALL3_ADDRESS_31337=""
    gateway = gateway_for(chain_id)
    assert gateway.multicall_address is None
    sent = spy(monkeypatch, gateway)
    manifest = chain.lat("latORB")
    block = gateway.head()
    assert read_lat(gateway, manifest, block) == expected_lat(chain, manifest, block)
    assert [m for m, _ in sent if m == "eth_getCode"] == []
    calls = [p for m, p in sent if m == "eth_call"]
    assert calls
    assert all(p[0]["to"].lower() != MULTICALL3_ADDRESS.lower() for p in calls)


def test_a_per_chain_address_turns_multicall3_on(chain: Chain, settings, monkeypatch):
    chain_id = chain.w3.eth.chain_id
    settings.RPC_URL, settings.RPC_URLS = chain.url, {}
    settings.MULTICALL3_ADDRESS = ""  # off by default, on for this chain
    settings.MULTICALL3_ADDRESSES = {chain_id: MULTICALL3_ADDRESS}
    gateway = gateway_for(chain_id)
    sent = spy(monkeypatch, gateway)
    manifest = chain.lat("latORB")
    block = gateway.head()
    assert read_lat(gateway, manifest, block) == expected_lat(chain, manifest, block)
    through_multicall3 = [
        p for m, p in sent if m == "eth_call" and p[0]["to"].lower() == MULTICALL3_ADDRESS.lower()
    ]
    assert len(through_multicall3) == (2 if chain.multicall else 0)  # read_lat's two rounds


def test_gateway_for_takes_its_options_from_settings(chain: Chain, settings) -> None:
    chain_id = chain.w3.eth.chain_id
    settings.RPC_URL, settings.RPC_URLS, settings.RPC_TIMEOUT = chain.url, {}, 7.5
    settings.RPC_BATCH_SIZE = 37
    default, quick = gateway_for(chain_id), gateway_for(chain_id, timeout=1.25)
    assert default.w3.provider.get_request_kwargs()["timeout"] == 7.5
    assert quick.w3.provider.get_request_kwargs()["timeout"] == 1.25
    assert default.batch_size == quick.batch_size == 37
    assert default.w3.provider.exception_retry_configuration is None
    assert quick.head().number == chain.w3.eth.block_number


# --- batches -------------------------------------------------------------------------------


def test_batches_are_split_at_batch_size(chain: Chain) -> None:
    gateway, provider = recording_gateway(chain.url, batch_size=3)
    numbers = range(1, 11)
    blocks = gateway.blocks(numbers)
    assert provider.batches == [3, 3, 3, 1]
    for number in numbers:
        raw = chain.w3.eth.get_block(number)
        expected = Block(number, "0x" + raw["hash"].hex().removeprefix("0x"), raw["timestamp"])
        assert blocks[number] == expected


def test_plain_route_reads_are_split_at_batch_size(chain: Chain) -> None:
    gateway, provider = recording_gateway(chain.url, multicall=None, batch_size=4)
    manifest = chain.lat("latETH")
    block = gateway.head()
    assert read_lat(gateway, manifest, block) == expected_lat(chain, manifest, block)
    assert read_nodes(gateway, manifest, block) == expected_nodes(chain, manifest, block)
    assert provider.batches
    assert max(provider.batches) == 4
    assert sum(provider.batches) == provider.count("eth_call") > 4


def _outcomes(results: list[tuple | ChainCallReverted]) -> list[tuple]:
    return [
        ("reverted", r.reason, r.name) if isinstance(r, ChainCallReverted) else ("ok", *r)
        for r in results
    ]


def test_a_revert_in_a_batch_fails_only_that_call(chain: Chain) -> None:
    eth, orb = chain.lat("latETH"), chain.lat("latORB")
    a = addresses(eth)
    orb_token, steth = orb["tokens"][0]["address"], eth["tokens"][0]["address"]
    invalid = "0x00000000000000000000000000000000000000fE"
    chain.rpc("anvil_setCode", invalid, "0xfe")  # INVALID: fails without revert data
    total_supply = function("LiquidToken", "totalSupply")
    token_info = function("LiquidTokenManager", "getTokenInfo")
    calls = [
        (a["proxy"], total_supply, ()),
        (a["manager"], token_info, (orb_token,)),  # not a token of latETH: reverts
        (NO_CODE, total_supply, ()),
        (invalid, total_supply, ()),
        (a["manager"], token_info, (steth,)),
    ]
    plain, _ = recording_gateway(chain.url, multicall=None, batch_size=2)
    block = plain.head()
    at = {"block_identifier": block.number}
    ltm = chain.contract("LiquidTokenManager", a["manager"]).functions
    expected = [
        ("ok", chain.contract("LiquidToken", a["proxy"]).functions.totalSupply().call(**at)),
        ("reverted", f"TokenNotSupported({orb_token})", "TokenNotSupported"),
        ("reverted", "totalSupply: no contract code at the address", ""),
        ("reverted", "reverted without a reason", ""),
        ("ok", ltm.getTokenInfo(steth).call(**at)),  # one TokenInfo struct
    ]
    assert _outcomes(plain.multicall(calls, block=block.number)) == expected
    if chain.multicall:  # aggregate3's allowFailure gives exactly the same
        helper, provider = recording_gateway(chain.url)
        assert _outcomes(helper.multicall(calls, block=block.number)) == expected
        assert provider.count("eth_call", to=MULTICALL3_ADDRESS) == 1
    with pytest.raises(ChainCallReverted, match="TokenNotSupported"):
        plain._strict(calls[:2], block=block.number)


# --- transport -----------------------------------------------------------------------------


def test_web3_does_not_retry_by_itself() -> None:
    """A node that accepts connections and never answers: one attempt, a timeout, then
    ChainUnavailable (web3's default would try eth_blockNumber five times)."""
    held: list[socket.socket] = []
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        server.settimeout(0.05)
        url = f"http://127.0.0.1:{server.getsockname()[1]}"

        def hold_connections(stop: threading.Event) -> None:
            while not stop.is_set():
                try:
                    held.append(server.accept()[0])
                except TimeoutError:
                    continue

        stop = threading.Event()
        thread = threading.Thread(target=hold_connections, args=(stop,), daemon=True)
        thread.start()
        try:
            with pytest.raises(ChainUnavailable):
                gateway_for_url(url, timeout=0.3).head()
        finally:
            stop.set()
            thread.join()
            for connection in held:
                connection.close()
    assert len(held) == 1
