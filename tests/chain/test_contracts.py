"""The project's Solidity test contracts and the demo devnet, against a real anvil node.

The LAT contracts behave as upstream's Mainnet v1 (OpenZeppelin 4.9): string reverts, roles,
a deposit that refreshes stale prices first. Expected values are worked out by hand from the
scripted history in ``devchain.devnet`` (amounts, prices, strategy rates, slashing), not read
back from the contracts.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest
from eth_abi import encode as abi_encode
from web3 import Web3
from web3.exceptions import BadFunctionCallOutput, ContractCustomError, ContractLogicError

from devchain import compile as chain_compile
from devchain.anvil import start_anvil
from devchain.devnet import (
    BEACON_CHAIN_ETH,
    DAY,
    DAY_OPENS_AT,
    EIP1967_ADMIN_SLOT,
    EIP1967_BEACON_SLOT,
    EIP1967_IMPLEMENTATION_SLOT,
    HISTORY_DAYS,
    MULTICALL3_ADDRESS,
    V1_0_2,
    DevnetError,
    connect,
    contract,
    decode_error,
    deploy_devnet,
    deposit_many,
    devnet_first_day,
    devnet_genesis,
    load_artifacts,
    make_deposits,
    manifest_tokens,
    scripted_day,
    service_manifest,
    utc_day,
)
from tests.devnet_values import (
    ETH_SUPPLY,
    ETH_TOTAL_ASSETS,
    OPERATOR_CBETH_SHARES,
    OPERATOR_STETH_SHARES,
    OUTSIDE_STETH,
    eth_total_assets,
)

if TYPE_CHECKING:
    from tests.conftest import Chain

pytestmark = pytest.mark.chain

WAD = 10**18
ZERO = "0x0000000000000000000000000000000000000000"
STETH_RATE = 105 * 10**16  # stETH strategy: 1 share = 1.05 stETH
CBETH_RATE = 102 * 10**16  # cbETH strategy: 1 share = 1.02 cbETH
ORB_RATE = 110 * 10**16
# Anvil's default-mnemonic accounts used by the devnet.
OPERATOR_4 = "0x15d34AAf54267DB7D7c367839AAf71A00a2C6A65"
OPERATOR_5 = "0x9965507D1a55bcC2695C58ba16FB37d819B0A4dc"  # slashed by 10 %
OPERATOR_6 = "0x976EA74026E726554dB657fA54763abd0C3a0aa9"
OPERATOR_20 = "0x09DB0a93B389bEF724429898f539AEB7ac2Dd55f"  # no LAT delegates to 20 or 21
OPERATOR_21 = "0x02484cb50AAC86Eae85610D6f4Bf026f30f6627D"
AVS_ETH_OWNER = "0x14dC79964da2C08b23698B3D3cc7Ca32193d9955"  # account 7
AVS_ETH = "0xef11D1c2aA48826D4c41e54ab82D1Ff5Ad8A64Ca"  # the ServiceManager account 7 deployed
AVS_ORB = "0x23618e81E3f5cdF7f54C3d65f7FBc0aBf5B21E8f"  # account 8 itself
AVS_BTC = "0xa0Ee7A142d267C1f36714E4a8F75612F20a79720"  # account 9 itself
PROXY_ADMIN = "0x8626f6940E2eb28930eFb4CeF49B2d1F2C9C1199"
FRESH = 11  # an anvil account the devnet never uses
FRESH_ADDRESS = "0x71bE63f3384f5fb98995898A86B02Fb2426c5788"  # anvil account 11
PAUSER_ROLE = Web3.keccak(text="PAUSER_ROLE")


def revert_of(excinfo: pytest.ExceptionInfo[ContractLogicError]) -> tuple[str, tuple[Any, ...]]:
    return decode_error(excinfo.value.data)


def missing_role(account: str, role: bytes) -> str:
    """OpenZeppelin 4.9's AccessControl revert string (lower-case hex, as its Strings writes)."""
    return f"AccessControl: account {account.lower()} is missing role 0x{role.hex()}"


def mined(chain: Chain, tx: Any) -> Any:
    receipt = chain.w3.eth.wait_for_transaction_receipt(tx, poll_latency=0.01)
    assert receipt["status"] == 1
    return receipt


def lat_contracts(chain: Chain, symbol: str) -> dict[str, Any]:
    manifest = chain.lat(symbol)
    proxies = manifest["contractDeployments"]["proxy"]
    ltm = chain.contract("LiquidTokenManager", proxies["liquidTokenManager"]["address"])
    tokens = {}
    for entry in manifest["tokens"]:
        token = chain.contract("TestERC20", entry["address"])
        tokens[token.functions.symbol().call()] = token
    return {
        "manifest": manifest,
        "lt": chain.contract("LiquidToken", manifest["proxyAddress"]),
        "ltm": ltm,
        "coordinator": chain.contract(
            "StakerNodeCoordinator", proxies["stakerNodeCoordinator"]["address"]
        ),
        "oracle": chain.contract("TokenRegistryOracle", proxies["tokenRegistryOracle"]["address"]),
        "dm": chain.contract("DelegationManager", manifest["eigenlayer"]["delegationManager"]),
        "tokens": tokens,
        "strategies": {
            symbol: chain.contract("Strategy", ltm.functions.getTokenStrategy(t.address).call())
            for symbol, t in tokens.items()
        },
    }


def node(chain: Chain, lat: dict[str, Any], node_id: int) -> Any:
    address = lat["coordinator"].functions.getNodeById(node_id).call()
    return chain.contract("StakerNode", address)


# ----- compile -----


def test_committed_abis_match_a_fresh_compile() -> None:
    assert chain_compile.main(["--check"]) == 0


def test_compile_reports_errors_and_fails(tmp_path, monkeypatch, capsys) -> None:
    (tmp_path / "Broken.sol").write_text("pragma solidity ^0.8.24; contract Broken { uint x = ; }")
    monkeypatch.setattr(chain_compile, "CONTRACTS_DIR", tmp_path)
    monkeypatch.setattr(chain_compile, "BUILD_FILE", tmp_path / "build" / "contracts.json")
    monkeypatch.setattr(chain_compile, "ABI_DIR", tmp_path / "abi")

    assert chain_compile.main([]) == 1
    assert "ParserError" in capsys.readouterr().err
    assert not (tmp_path / "build").exists()


# ----- manifests -----


def test_manifests_follow_the_chain_md_format(chain: Chain) -> None:
    assert [m["symbol"] for m in chain.manifests] == ["latETH", "latORB", "latBTC"]
    for manifest in chain.manifests:
        assert set(manifest) == {
            "proxyAddress", "implementationAddress", "name", "symbol", "avsAddress", "baseAsset",
            "chainId", "maxNodes", "deploymentBlock", "contractDeployments", "tokens",
            "eigenlayer", "priceFeeds",
        }  # fmt: skip
        deployments = manifest["contractDeployments"]
        assert set(deployments["implementation"]) == {
            "liquidTokenManager", "stakerNodeCoordinator", "stakerNode", "tokenRegistryOracle",
        }  # fmt: skip
        assert set(deployments["proxy"]) == {
            "liquidTokenManager", "stakerNodeCoordinator", "tokenRegistryOracle",
        }  # fmt: skip
        assert manifest["chainId"] == 31337
        addresses = [manifest["proxyAddress"], manifest["implementationAddress"],
                     manifest["avsAddress"], manifest["baseAsset"],
                     *manifest["eigenlayer"].values(), *manifest["priceFeeds"],
                     *manifest["priceFeeds"].values()]  # fmt: skip
        for part in deployments.values():
            addresses += [ref["address"] for ref in part.values()]
            assert all(ref["block"] <= chain.w3.eth.block_number for ref in part.values())
        for token in manifest["tokens"]:
            addresses += [token["address"], token["strategy"]]
        assert all(a == Web3.to_checksum_address(a) for a in addresses)
        # deploymentBlock is the block that created the LiquidToken proxy.
        block = manifest["deploymentBlock"]
        assert len(chain.w3.eth.get_code(manifest["proxyAddress"], block - 1)) == 0
        assert len(chain.w3.eth.get_code(manifest["proxyAddress"], block)) > 0

    eth, orb, btc = chain.manifests
    assert (eth["name"], eth["baseAsset"], eth["maxNodes"]) == (
        "Liquid AVS Token ETH", BEACON_CHAIN_ETH, 10,
    )  # fmt: skip
    assert [m["avsAddress"] for m in chain.manifests] == [AVS_ETH, AVS_ORB, AVS_BTC]
    assert orb["baseAsset"] == orb["tokens"][0]["address"]  # the AVS's own token
    assert btc["baseAsset"] == btc["tokens"][0]["address"]  # WBTC
    assert eth["priceFeeds"] == {}
    assert set(orb["priceFeeds"]) == {orb["baseAsset"]}
    assert set(btc["priceFeeds"]) == {t["address"] for t in btc["tokens"]}


def test_published_manifests_follow_the_deployment_repositories_format(chain: Chain) -> None:
    """As upstream's deploy scripts write them (../shared/fixtures/published-manifests/), with
    the service's two optional members; the service's own format is the same LATs."""
    for published, manifest in zip(chain.published, chain.manifests, strict=True):
        assert set(published) == {
            "proxyAddress", "implementationAddress", "proxyAdminAddress", "name", "symbol",
            "avsAddress", "baseAsset", "chainId", "maxNodes", "deploymentBlock",
            "deploymentTimestamp", "contractDeployments", "roles", "tokens", "eigenlayer",
            "priceFeeds",
        }  # fmt: skip
        assert published["roles"] == dict.fromkeys(
            ("admin", "pauser", "priceUpdater", "deployer"), chain.account(0)
        )
        assert list(published["tokens"]) == [str(i) for i in range(len(manifest["tokens"]))]
        assert manifest_tokens(published) == manifest["tokens"]
        block = chain.w3.eth.get_block(published["deploymentBlock"])
        assert published["deploymentTimestamp"] == block["timestamp"] * 1000
        for part in published["contractDeployments"].values():
            for ref in part.values():
                assert set(ref) == {"address", "block", "timestamp"}
                assert ref["timestamp"] == chain.w3.eth.get_block(ref["block"])["timestamp"] * 1000
        assert len(chain.w3.eth.get_code(published["proxyAdminAddress"])) > 0
        assert service_manifest(published) == manifest


def test_tokens_have_the_demo_decimals(chain: Chain) -> None:
    found = {
        symbol: token.functions.decimals().call()
        for lat in ("latETH", "latORB", "latBTC")
        for symbol, token in lat_contracts(chain, lat)["tokens"].items()
    }
    assert found == {"stETH": 18, "cbETH": 6, "ORB": 18, "WBTC": 8, "tBTC": 18}


# ----- proxy -----


def test_liquid_token_proxy_delegates_through_the_eip1967_slot(chain: Chain) -> None:
    lat = lat_contracts(chain, "latETH")
    manifest = lat["manifest"]
    slot = chain.w3.eth.get_storage_at(manifest["proxyAddress"], EIP1967_IMPLEMENTATION_SLOT)
    assert Web3.to_checksum_address(slot[-20:]) == manifest["implementationAddress"]
    # The proxies' admin is a ProxyAdmin contract (the manifest's proxyAdminAddress), owned by
    # the devnet's proxy admin account.
    admin = chain.w3.eth.get_storage_at(manifest["proxyAddress"], EIP1967_ADMIN_SLOT)
    proxy_admin = Web3.to_checksum_address(admin[-20:])
    assert proxy_admin == chain.published[0]["proxyAdminAddress"]
    assert chain.contract("ProxyAdmin", proxy_admin).functions.owner().call() == PROXY_ADMIN

    # State lives in the proxy, code in the implementation, which cannot be initialised.
    assert lat["lt"].functions.name().call() == "Liquid AVS Token ETH"
    implementation = chain.contract("LiquidToken", manifest["implementationAddress"])
    assert implementation.functions.name().call() == ""
    init = ("X", "X", FRESH_ADDRESS, FRESH_ADDRESS, FRESH_ADDRESS, FRESH_ADDRESS)
    with pytest.raises(ContractLogicError) as excinfo:
        implementation.functions.initialize(init).call()
    assert revert_of(excinfo) == ("Error", ("Initializable: contract is already initialized",))

    # The other proxies point at their implementations; each staker node is a BeaconProxy of
    # the coordinator's beacon, which points at the StakerNode implementation.
    deployments = manifest["contractDeployments"]
    for name, ref in deployments["proxy"].items():
        slot = chain.w3.eth.get_storage_at(ref["address"], EIP1967_IMPLEMENTATION_SLOT)
        assert (
            Web3.to_checksum_address(slot[-20:]) == deployments["implementation"][name]["address"]
        )
    beacon = lat["coordinator"].functions.upgradeableBeacon().call()
    node_implementation = deployments["implementation"]["stakerNode"]["address"]
    assert chain.contract("UpgradeableBeacon", beacon).functions.implementation().call() == (
        node_implementation
    )
    for node_address in lat["coordinator"].functions.getAllNodes().call():
        slot = chain.w3.eth.get_storage_at(node_address, EIP1967_BEACON_SLOT)
        assert Web3.to_checksum_address(slot[-20:]) == beacon
        staker_node = chain.contract("StakerNode", node_address).functions
        assert staker_node.implementation().call() == node_implementation
        assert staker_node.getInitializedVersion().call() == 1


def test_proxy_admin_can_only_upgrade(chain: Chain) -> None:
    lat = lat_contracts(chain, "latETH")
    proxy = lat["manifest"]["proxyAddress"]
    proxy_admin = chain.contract("ProxyAdmin", chain.published[0]["proxyAdminAddress"])
    with pytest.raises(ContractLogicError) as excinfo:
        lat["lt"].functions.name().call({"from": proxy_admin.address})
    assert revert_of(excinfo) == (
        "Error", ("TransparentUpgradeableProxy: admin cannot fallback to proxy target",),
    )  # fmt: skip

    # Upgrade to a new LiquidToken implementation: state is kept, the slot changes.
    artifact = chain_compile.load_build()["contracts"]["LiquidToken"]
    factory = chain.w3.eth.contract(abi=artifact["abi"], bytecode=artifact["bytecode"])
    new_impl = mined(chain, factory.constructor().transact({"from": chain.account(0)}))[
        "contractAddress"
    ]
    with pytest.raises(ContractLogicError) as excinfo:
        proxy_admin.functions.upgrade(proxy, new_impl).call({"from": chain.account(0)})
    assert revert_of(excinfo) == ("Error", ("Ownable: caller is not the owner",))
    upgrade = proxy_admin.functions.upgrade(proxy, new_impl)
    receipt = mined(chain, upgrade.transact({"from": PROXY_ADMIN}))
    upgraded = chain.contract("TransparentUpgradeableProxy", proxy).events.Upgraded()
    assert [e["args"]["implementation"] for e in upgraded.process_receipt(receipt)] == [new_impl]
    slot = chain.w3.eth.get_storage_at(proxy, EIP1967_IMPLEMENTATION_SLOT)
    assert Web3.to_checksum_address(slot[-20:]) == new_impl
    assert lat["lt"].functions.symbol().call() == "latETH"


# ----- EigenLayer stand-ins -----


def test_strategy_shares_are_not_one_to_one(chain: Chain) -> None:
    lat = lat_contracts(chain, "latETH")
    steth, cbeth = lat["strategies"]["stETH"], lat["strategies"]["cbETH"]
    assert steth.functions.sharesToUnderlyingView(10**18).call() == 1_050_000_000_000_000_000
    assert steth.functions.sharesToUnderlyingView(3).call() == 3  # 3.15 rounds down
    assert cbeth.functions.sharesToUnderlyingView(1_000_000).call() == 1_020_000
    assert steth.functions.underlyingToken().call() == lat["tokens"]["stETH"].address
    # The ETH LAT stakes 8 stETH to node 0 and 4 stETH to node 1, the stakers outside the LATs
    # 40, 25, 50 and 100 stETH: each deposit's shares rounded down.
    outside = sum(amount * WAD * WAD // STETH_RATE for amount in (40, 25, 50, 100))
    assert (
        steth.functions.totalShares().call()
        == 8 * WAD * WAD // STETH_RATE + 4 * WAD * WAD // STETH_RATE + outside
    )


def test_withdrawable_shares_net_out_the_operator_slashing(chain: Chain) -> None:
    lat = lat_contracts(chain, "latETH")
    steth, cbeth = lat["strategies"]["stETH"].address, lat["strategies"]["cbETH"].address
    node0 = lat["coordinator"].functions.getNodeById(0).call()  # delegated to operator 4
    node1 = lat["coordinator"].functions.getNodeById(1).call()  # delegated to operator 5 (-10 %)
    node2 = lat["coordinator"].functions.getNodeById(2).call()  # undelegated, nothing staked
    dm = lat["dm"].functions

    withdrawable, deposited = dm.getWithdrawableShares(node0, [steth, cbeth]).call()
    assert deposited == [7_619_047_619_047_619_047, 9_803_921]  # 8e18 / 1.05, 10e6 / 1.02
    assert withdrawable == deposited

    withdrawable, deposited = dm.getWithdrawableShares(node1, [steth]).call()
    assert deposited == [3_809_523_809_523_809_523]  # 4e18 / 1.05
    assert withdrawable == [3_428_571_428_571_428_570]  # 90 % of it, rounded down

    assert dm.getWithdrawableShares(node2, [steth]).call() == [[0], [0]]
    assert dm.operatorShares(OPERATOR_5, steth).call() == 3_428_571_428_571_428_570
    assert dm.operatorShares(OPERATOR_4, cbeth).call() == 9_803_921 + 19_607_843  # + staker 22
    assert dm.delegatedTo(node0).call() == OPERATOR_4
    assert dm.delegatedTo(node2).call() == ZERO


def test_staker_nodes_and_their_delegations(chain: Chain) -> None:
    expected = {
        "latETH": [OPERATOR_4, OPERATOR_5, ZERO],
        "latORB": [OPERATOR_6, OPERATOR_5, ZERO],  # node 2 was delegated, then undelegated
        "latBTC": [OPERATOR_4, ZERO],
    }
    for symbol, operators in expected.items():
        lat = lat_contracts(chain, symbol)
        coordinator = lat["coordinator"].functions
        assert coordinator.getStakerNodesCount().call() == len(operators)
        assert coordinator.maxNodes().call() == lat["manifest"]["maxNodes"]
        nodes = coordinator.getAllNodes().call()
        for node_id, operator in enumerate(operators):
            staker_node = node(chain, lat, node_id)
            assert staker_node.address == nodes[node_id]
            assert staker_node.functions.getId().call() == node_id
            assert staker_node.functions.getOperatorDelegation().call() == operator
            assert lat["dm"].functions.delegatedTo(staker_node.address).call() == operator

    orb_node2 = node(chain, lat_contracts(chain, "latORB"), 2)
    events = orb_node2.events.UndelegatedFromOperator().get_logs(from_block=0)
    assert [e["args"]["operator"] for e in events] == [OPERATOR_4]


def test_rewards_submission_and_operator_splits(chain: Chain) -> None:
    eth = lat_contracts(chain, "latETH")
    rc = chain.contract("RewardsCoordinator", eth["manifest"]["eigenlayer"]["rewardsCoordinator"])
    split = rc.functions.getOperatorAVSSplit
    assert split(OPERATOR_4, AVS_ETH).call() == 2000  # 500 on D0, 2000 from scripted day 4
    assert split(OPERATOR_5, AVS_ETH).call() == 1000  # none set: EigenLayer's 10 % default
    assert split(OPERATOR_6, AVS_ORB).call() == 2500
    assert split(OPERATOR_4, AVS_BTC).call() == 0

    events = rc.events.AVSRewardsSubmissionCreated().get_logs(from_block=0)
    # Each AVS's first submission on D0, then latETH's on scripted days 6 and 7 (its nonce 1
    # went to the operator-directed submission of day 5).
    assert [(e["args"]["avs"], e["args"]["submissionNonce"]) for e in events] == [
        (AVS_ETH, 0), (AVS_ORB, 0), (AVS_BTC, 0), (AVS_ETH, 2), (AVS_ETH, 3),
    ]  # fmt: skip
    event = events[0]["args"]
    submission = event["rewardsSubmission"]
    strategies = sorted((s.address for s in eth["strategies"].values()), key=lambda a: int(a, 16))
    assert [(x["strategy"], x["multiplier"]) for x in submission["strategiesAndMultipliers"]] == [
        (s, WAD) for s in strategies
    ]
    assert submission["token"] == eth["tokens"]["stETH"].address
    assert submission["amount"] == 15 * WAD // 100
    assert submission["duration"] == 7 * 86_400
    assert submission["startTimestamp"] % 86_400 == 0
    assert event["submissionNonce"] == 0
    encoded = abi_encode(
        ["address", "uint256", "((address,uint96)[],address,uint256,uint32,uint32)"],
        [AVS_ETH, 0, ([(s, WAD) for s in strategies], submission["token"], 15 * WAD // 100,
                      submission["startTimestamp"], 7 * 86_400)],
    )  # fmt: skip
    assert event["rewardsSubmissionHash"] == Web3.keccak(encoded)


def test_avs_metadata_is_a_json_data_uri(chain: Chain) -> None:
    directory = chain.contract("AVSDirectory", chain.manifests[0]["eigenlayer"]["avsDirectory"])
    events = directory.events.AVSMetadataURIUpdated().get_logs(from_block=0)
    assert [e["args"]["avs"] for e in events] == [AVS_ETH, AVS_ORB, AVS_BTC]
    uri = events[1]["args"]["metadataURI"]
    prefix = "data:application/json;base64,"
    assert uri.startswith(prefix)
    document = json.loads(base64.b64decode(uri[len(prefix) :]))
    assert document["name"] == "Orbit Network"
    assert {"name", "website", "description", "logo", "twitter"} <= set(document)


def test_price_feeds(chain: Chain) -> None:
    orb = chain.lat("latORB")
    feed = chain.contract("PriceFeed", orb["priceFeeds"][orb["baseAsset"]])
    round_id, answer, _, updated_at, answered_in = feed.functions.latestRoundData().call()
    assert feed.functions.decimals().call() == 18
    assert (round_id, answer, answered_in) == (2, 420_000_000_000_000, 2)  # 0.0004 then 0.00042
    assert updated_at > 0
    btc = chain.lat("latBTC")
    wbtc_feed = chain.contract("PriceFeed", btc["priceFeeds"][btc["baseAsset"]])
    assert wbtc_feed.functions.latestRoundData().call()[1] == 30 * WAD


# ----- LiquidTokenManager and oracle -----


def test_token_registry(chain: Chain) -> None:
    lat = lat_contracts(chain, "latETH")
    ltm = lat["ltm"].functions
    steth, cbeth = lat["tokens"]["stETH"].address, lat["tokens"]["cbETH"].address
    assert ltm.getSupportedTokens().call() == [t["address"] for t in lat["manifest"]["tokens"]]
    # getTokenInfo returns the TokenInfo struct (one static tuple, the same bytes as 3 words).
    assert ltm.getTokenInfo(steth).call() == (18, 999 * 10**15, 5 * 10**16)
    assert ltm.getTokenInfo(cbeth).call() == (6, 109 * 10**16, 0)
    assert ltm.getTokenStrategy(cbeth).call() == lat["manifest"]["tokens"][1]["strategy"]
    assert ltm.convertToUnitOfAccount(cbeth, 2_000_000).call() == 2_180_000_000_000_000_000
    assert ltm.stakerNodeCoordinator().call() == lat["coordinator"].address
    assert ltm.delegationManager().call() == lat["manifest"]["eigenlayer"]["delegationManager"]
    assert ltm.strategyManager().call() == lat["manifest"]["eigenlayer"]["strategyManager"]
    assert lat["oracle"].functions.getRate(steth).call() == 999 * 10**15
    assert lat["oracle"].functions.arePricesStale().call() is False

    # rETH was added, then removed again.
    added = lat["ltm"].events.TokenAdded().get_logs(from_block=0)
    removed = lat["ltm"].events.TokenRemoved().get_logs(from_block=0)
    assert len(added) == 3
    assert [e["args"]["token"] for e in removed] == [added[2]["args"]["token"]]
    assert ltm.tokenIsSupported(added[2]["args"]["token"]).call() is False
    with pytest.raises(ContractCustomError) as excinfo:
        ltm.getTokenInfo(added[2]["args"]["token"]).call()
    assert revert_of(excinfo) == ("TokenNotSupported", (added[2]["args"]["token"],))
    with pytest.raises(ContractCustomError) as excinfo:
        ltm.getTokenStrategy(added[2]["args"]["token"]).call()
    assert revert_of(excinfo) == ("StrategyNotFound", (added[2]["args"]["token"],))
    with pytest.raises(ContractCustomError) as excinfo:
        ltm.getTokenStrategy(ZERO).call()
    assert revert_of(excinfo) == ("ZeroAddress", ())

    updates = lat["ltm"].events.TokenPriceUpdated().get_logs(from_block=0)
    assert [
        (e["args"]["token"], e["args"]["oldPrice"], e["args"]["newPrice"], e["args"]["updater"])
        for e in updates
    ] == [
        (cbeth, 108 * 10**16, 109 * 10**16, chain.account(0)),  # LTM.updatePrice, the deployer
        (steth, WAD, 999 * 10**15, lat["oracle"].address),  # TokenRegistryOracle.updateRate
        # The price updater's refresh when the devnet is handed over: the same prices.
        (steth, 999 * 10**15, 999 * 10**15, lat["oracle"].address),
        (cbeth, 109 * 10**16, 109 * 10**16, lat["oracle"].address),
    ]


def test_eth_lat_balances_and_total_assets_by_hand(chain: Chain) -> None:
    lat = lat_contracts(chain, "latETH")
    steth, cbeth = lat["tokens"]["stETH"].address, lat["tokens"]["cbETH"].address
    lt, ltm = lat["lt"].functions, lat["ltm"].functions

    # stETH: 15 deposited, 8 + 4 staked, 1 queued. cbETH: 23 + 2 deposited, 10 staked.
    assert lt.balanceAssets([steth, cbeth]).call() == [2 * WAD, 15 * 10**6]
    assert lt.balanceQueuedAssets([steth, cbeth]).call() == [WAD, 0]

    node0_steth = 7_619_047_619_047_619_047 * STETH_RATE // WAD  # 7999999999999999999
    node1_steth = 3_809_523_809_523_809_523 * STETH_RATE // WAD  # 3999999999999999999
    node1_steth_net = 3_428_571_428_571_428_570 * STETH_RATE // WAD  # 3599999999999999998
    node0_cbeth = 9_803_921 * CBETH_RATE // WAD  # 9999999
    # The manager's balances are the nodes' stake only (deposited, and withdrawable net of
    # slashing); totalAssets adds the LAT's unstaked and queued balances.
    assert ltm.getDepositAssetBalance(steth).call() == node0_steth + node1_steth
    assert ltm.getWithdrawableAssetBalance(steth).call() == node0_steth + node1_steth_net
    assert ltm.getWithdrawableAssetBalanceNode(steth, 1).call() == node1_steth_net
    assert ltm.getDepositAssetBalanceNode(steth, 1).call() == node1_steth
    steth_total = 3 * WAD + node0_steth + node1_steth_net
    assert steth_total == 14_599_999_999_999_999_997
    assert ltm.getWithdrawableAssetBalance(cbeth).call() == node0_cbeth
    cbeth_total = 15 * 10**6 + node0_cbeth
    assert cbeth_total == 24_999_999

    total_assets = steth_total * 999 * 10**15 // WAD + cbeth_total * 109 * 10**16 // 10**6
    assert lt.totalAssets().call() == total_assets == 41_835_398_909_999_999_997

    # Shares: 1:1 until staking (10 + 21.6 + 5 + 3.24), then 2 cbETH at the diluted rate.
    supply_before = 39_840_000_000_000_000_000
    assets_before = total_assets - 2 * 109 * 10**16
    late_shares = 218 * 10**16 * supply_before // assets_before
    assert lt.totalSupply().call() == supply_before + late_shares
    deposits = lat["lt"].events.AssetDeposited().get_logs(from_block=0)
    assert [e["args"]["shares"] for e in deposits] == [
        10 * WAD, 21_600_000_000_000_000_000, 5 * WAD, 3_240_000_000_000_000_000, late_shares,
    ]  # fmt: skip
    assert lt.balanceOf(chain.account(1)).call() == 10 * WAD + late_shares


def test_staked_assets_moved_to_nodes(chain: Chain) -> None:
    lat = lat_contracts(chain, "latBTC")
    events = lat["ltm"].events.AssetsStakedToNode().get_logs(from_block=0)
    wbtc, tbtc = lat["tokens"]["WBTC"].address, lat["tokens"]["tBTC"].address
    assert [(e["args"]["nodeId"], e["args"]["assets"], e["args"]["amounts"]) for e in events] == [
        (0, [wbtc, tbtc], [150_000_000, WAD]),
        (1, [wbtc], [50_000_000]),
    ]
    # The tokens sit in the strategies; the LAT keeps the rest (2.5 + 0.1 WBTC, 1.75 tBTC).
    assert (
        lat["tokens"]["WBTC"].functions.balanceOf(lat["strategies"]["WBTC"].address).call()
        == 200_000_000
    )
    assert lat["lt"].functions.balanceAssets([wbtc, tbtc]).call() == [60_000_000, 65 * 10**16]
    assert lat["lt"].functions.balanceQueuedAssets([tbtc]).call() == [10**17]
    node1 = node(chain, lat, 1).address  # undelegated, yet holding shares
    _, deposited = (
        lat["dm"].functions.getWithdrawableShares(node1, [lat["strategies"]["WBTC"].address]).call()
    )
    assert deposited == [50_000_000 * WAD // (101 * 10**16)]


# ----- deposits -----


def test_deposit_mints_hand_computed_shares(chain: Chain) -> None:
    lat = lat_contracts(chain, "latETH")
    steth = lat["tokens"]["stETH"].address
    supply, assets = (
        lat["lt"].functions.totalSupply().call(),
        lat["lt"].functions.totalAssets().call(),
    )
    amount = 3 * WAD
    expected = amount * 999 * 10**15 // WAD * supply // assets  # value in ETH * supply / assets
    assert lat["lt"].functions.calculateShares(steth, amount).call() == expected

    result = make_deposits(chain.url, lat["manifest"], FRESH, [steth], [amount])

    assert result["shares"] == [expected]
    assert lat["lt"].functions.balanceOf(chain.account(FRESH)).call() == expected
    (event,) = lat["lt"].events.AssetDeposited().get_logs(from_block=result["blockNumber"])
    assert dict(event["args"]) == {
        "sender": chain.account(FRESH), "receiver": chain.account(FRESH), "asset": steth,
        "amount": amount, "shares": expected,
    }  # fmt: skip


def test_calculate_amount_inverts_calculate_shares(chain: Chain) -> None:
    lat = lat_contracts(chain, "latBTC")
    wbtc = lat["tokens"]["WBTC"].address
    lt = lat["lt"].functions
    shares = lt.calculateShares(wbtc, 100_000_000).call()
    assert 99_999_998 <= lt.calculateAmount(wbtc, shares).call() <= 100_000_000
    # One LAT share is worth totalAssets / totalSupply units of account, here in WBTC.
    one = lt.calculateAmount(wbtc, WAD).call()
    assert one == WAD * lt.totalAssets().call() // lt.totalSupply().call() * 10**8 // WAD


def test_legacy_lat_emits_deposit_instead_of_asset_deposited(chain: Chain) -> None:
    orb = lat_contracts(chain, "latORB")
    legacy = orb["lt"].events.Deposit().get_logs(from_block=0)
    assert [e["args"]["amount"] for e in legacy] == [1000 * WAD, 2500 * WAD, 500 * WAD, 10 * WAD]
    assert orb["lt"].events.AssetDeposited().get_logs(from_block=0) == []
    eth = lat_contracts(chain, "latETH")
    assert len(eth["lt"].events.AssetDeposited().get_logs(from_block=0)) == 5
    assert eth["lt"].events.Deposit().get_logs(from_block=0) == []


@pytest.mark.parametrize(
    ("case", "expected_name"),
    [
        ("length", "ArrayLengthMismatch"),
        ("zero", "ZeroAmount"),
        ("unsupported", "UnsupportedAsset"),
        ("dust", "ZeroShares"),
        ("allowance", "ERC20InsufficientAllowance"),
        ("balance", "ERC20InsufficientBalance"),
    ],
)
def test_deposit_reverts_with_named_errors(chain: Chain, case: str, expected_name: str) -> None:
    eth = lat_contracts(chain, "latETH")
    steth = eth["tokens"]["stETH"]
    orb_token = lat_contracts(chain, "latORB")["tokens"]["ORB"].address
    sender = chain.account(FRESH)
    send = {"from": sender}
    setup = [steth.functions.mint(sender, 5 * WAD).transact(send)]
    if case != "allowance":
        setup.append(steth.functions.approve(eth["lt"].address, 10 * WAD).transact(send))
    for tx in setup:  # mined before the call below reads their state
        assert chain.w3.eth.wait_for_transaction_receipt(tx, poll_latency=0.01)["status"] == 1
    calls = {
        "length": ([steth.address], [WAD, WAD]),
        "zero": ([steth.address], [0]),
        "unsupported": ([orb_token], [WAD]),
        "dust": ([steth.address], [1]),  # 1 wei is worth 0.999 wei of ETH: zero shares
        "allowance": ([steth.address], [WAD]),
        "balance": ([steth.address], [6 * WAD]),
    }
    assets, amounts = calls[case]
    with pytest.raises(ContractCustomError) as excinfo:
        eth["lt"].functions.deposit(assets, amounts, sender).call(send)
    name, args = revert_of(excinfo)
    assert name == expected_name
    if case == "unsupported":
        assert args == (orb_token,)
    if case == "allowance":
        assert args == (eth["lt"].address, 0, WAD)
    if case == "balance":
        assert args == (sender, 5 * WAD, 6 * WAD)


def test_fee_on_transfer_deposit_credits_what_arrived(chain: Chain) -> None:
    eth = lat_contracts(chain, "latETH")
    cbeth, lt = eth["tokens"]["cbETH"], eth["lt"]
    mined(chain, cbeth.functions.setTransferFee(100).transact({"from": chain.account(0)}))  # 1 %
    supply, assets = lt.functions.totalSupply().call(), lt.functions.totalAssets().call()
    received = 990_000  # 1 cbETH less its 1 % fee
    expected = received * 109 * 10**16 // 10**6 * supply // assets

    result = make_deposits(chain.url, eth["manifest"], FRESH, [cbeth.address], [10**6])

    assert result["shares"] == [expected]
    (event,) = lt.events.AssetDeposited().get_logs(from_block=result["blockNumber"])
    assert (event["args"]["amount"], event["args"]["shares"]) == (received, expected)
    assert lt.functions.balanceAssets([cbeth.address]).call() == [15 * 10**6 + received]


def test_deposit_into_a_lat_whose_holding_shrank_is_out_of_sync(chain: Chain) -> None:
    eth = lat_contracts(chain, "latETH")
    cbeth, lt = eth["tokens"]["cbETH"], eth["lt"]
    # 1 cbETH of the LAT's 15 unstaked is taken away (a negative rebase): its accounting now
    # exceeds what it holds, and the next deposit (2 cbETH) finds 17 accounted, 16 held.
    mined(chain, cbeth.functions.burnFrom(lt.address, 10**6).transact({"from": chain.account(0)}))
    sender = chain.account(FRESH)
    mined(chain, cbeth.functions.mint(sender, 2 * 10**6).transact({"from": sender}))
    mined(chain, cbeth.functions.approve(lt.address, 2 * 10**6).transact({"from": sender}))
    with pytest.raises(ContractCustomError) as excinfo:
        lt.functions.deposit([cbeth.address], [2 * 10**6], sender).call({"from": sender})
    assert revert_of(excinfo) == ("AssetBalanceOutOfSync", (cbeth.address, 17 * 10**6, 16 * 10**6))


def test_paused_deposit_reverts_with_the_pausable_string(chain: Chain) -> None:
    eth = lat_contracts(chain, "latETH")
    steth = eth["tokens"]["stETH"].address
    lt = eth["lt"]
    with pytest.raises(ContractLogicError) as excinfo:
        lt.functions.pause().call({"from": chain.account(FRESH)})
    assert revert_of(excinfo) == ("Error", (missing_role(chain.account(FRESH), PAUSER_ROLE),))

    mined(chain, lt.functions.pause().transact({"from": chain.account(0)}))
    assert lt.functions.paused().call() is True
    with pytest.raises(ContractLogicError) as excinfo:
        make_deposits(chain.url, eth["manifest"], FRESH, [steth], [WAD])
    assert revert_of(excinfo) == ("Error", ("Pausable: paused",))
    error_selector = Web3.keccak(text="Error(string)")[:4].hex().removeprefix("0x")
    assert str(excinfo.value.data).removeprefix("0x").startswith(error_selector)
    with pytest.raises(ContractLogicError) as excinfo:
        lt.functions.pause().call({"from": chain.account(0)})
    assert revert_of(excinfo) == ("Error", ("Pausable: paused",))

    mined(chain, lt.functions.unpause().transact({"from": chain.account(0)}))
    assert make_deposits(chain.url, eth["manifest"], FRESH, [steth], [WAD])["shares"][0] > 0


def test_admin_paths_are_role_gated(chain: Chain) -> None:
    eth = lat_contracts(chain, "latETH")
    steth = eth["tokens"]["stETH"].address
    stranger = {"from": chain.account(FRESH)}
    lt_admin = bytes(32)  # DEFAULT_ADMIN_ROLE
    cases = [
        (eth["lt"].functions.unpause(), lt_admin),
        (eth["ltm"].functions.updatePrice(steth, WAD), Web3.keccak(text="PRICE_UPDATER_ROLE")),
        (eth["ltm"].functions.setVolatilityThreshold(steth, 0), lt_admin),
        (eth["ltm"].functions.stakeAssetsToNode(0, [steth], [1]),
         Web3.keccak(text="STRATEGY_CONTROLLER_ROLE")),
        (eth["coordinator"].functions.createStakerNode(),
         Web3.keccak(text="STAKER_NODE_CREATOR_ROLE")),
        (eth["oracle"].functions.updateRate(steth, WAD), Web3.keccak(text="RATE_UPDATER_ROLE")),
        (eth["oracle"].functions.setPriceUpdateInterval(60), Web3.keccak(text="ORACLE_ADMIN_ROLE")),
    ]  # fmt: skip
    for call, role in cases:
        with pytest.raises(ContractLogicError) as excinfo:
            call.call(stranger)
        assert revert_of(excinfo) == ("Error", (missing_role(chain.account(FRESH), role),))
    # A staker node takes orders from its LAT's manager only.
    staker_node = node(chain, eth, 2)
    with pytest.raises(ContractCustomError) as excinfo:
        staker_node.functions.delegate(OPERATOR_4, (b"", 0), bytes(32)).call(stranger)
    delegator = Web3.keccak(text="STAKER_NODES_DELEGATOR_ROLE")
    assert revert_of(excinfo) == ("UnauthorizedAccess", (chain.account(FRESH), delegator))


def test_price_change_beyond_the_volatility_threshold_reverts(chain: Chain) -> None:
    eth = lat_contracts(chain, "latETH")
    steth = eth["tokens"]["stETH"].address
    with pytest.raises(ContractCustomError) as excinfo:
        eth["ltm"].functions.updatePrice(steth, 1_100 * 10**15).call({"from": chain.account(0)})
    # |1.1 - 0.999| / 0.999 = 10.11 % > the 5 % threshold
    assert revert_of(excinfo) == ("VolatilityThresholdHit", (steth, 101 * 10**18 // 999))


def test_prices_go_stale_after_a_day(chain: Chain) -> None:
    oracle = lat_contracts(chain, "latETH")["oracle"].functions
    assert oracle.arePricesStale().call() is False
    chain.rpc("evm_increaseTime", 86_401)
    chain.rpc("evm_mine")
    assert oracle.arePricesStale().call() is True


def rate_feed(chain: Chain, lat: dict[str, Any], symbol: str) -> Any:
    """The Chainlink-style feed the LAT's oracle reads the token's price from."""
    config = lat["oracle"].functions.tokenConfigs(lat["tokens"][symbol].address).call()
    assert config[0] == 1  # a Chainlink-style source
    return chain.contract("PriceFeed", config[3])


def test_a_deposit_while_prices_are_stale_refreshes_every_price_first(chain: Chain) -> None:
    eth = lat_contracts(chain, "latETH")
    lt, oracle = eth["lt"], eth["oracle"]
    steth, cbeth = eth["tokens"]["stETH"].address, eth["tokens"]["cbETH"].address
    owner, sender = chain.account(0), chain.account(FRESH)
    # cbETH's source now says 1.10 (stored: 1.09); stETH's still says 0.999.
    feed = rate_feed(chain, eth, "cbETH")
    mined(chain, feed.functions.setAnswer(110 * 10**16).transact({"from": owner}))
    chain.rpc("evm_increaseTime", 86_401)
    chain.rpc("evm_mine")
    assert oracle.functions.arePricesStale().call() is True
    amount = 2 * 10**6
    token = eth["tokens"]["cbETH"].functions
    mined(chain, token.mint(sender, amount).transact({"from": sender}))
    mined(chain, token.approve(lt.address, amount).transact({"from": sender}))

    # calculateShares still values cbETH at the stored 1.09; the deposit refreshes first.
    stale_estimate = amount * 109 * 10**16 // 10**6 * ETH_SUPPLY // ETH_TOTAL_ASSETS
    assert lt.functions.calculateShares(cbeth, amount).call() == stale_estimate
    assets_after_refresh = eth_total_assets(cbeth_price=110 * 10**16)
    expected = amount * 110 * 10**16 // 10**6 * ETH_SUPPLY // assets_after_refresh
    assert expected != stale_estimate
    deposit = lt.functions.deposit([cbeth], [amount], sender)
    assert deposit.call({"from": sender}) == [expected]
    receipt = mined(chain, deposit.transact({"from": sender}))
    block = receipt["blockNumber"]
    timestamp = chain.w3.eth.get_block(block)["timestamp"]

    refreshed = lt.events.PricesUpdatedBeforeDeposit().get_logs(from_block=block, to_block=block)
    assert [e["args"]["depositor"] for e in refreshed] == [sender]
    rates = oracle.events.TokenRateUpdated().get_logs(from_block=block, to_block=block)
    names = ("token", "oldRate", "newRate", "updater")
    assert [tuple(e["args"][n] for n in names) for e in rates] == [
        (steth, 999 * 10**15, 999 * 10**15, lt.address),
        (cbeth, 109 * 10**16, 110 * 10**16, lt.address),
    ]
    prices = eth["ltm"].events.TokenPriceUpdated().get_logs(from_block=block, to_block=block)
    names = ("token", "oldPrice", "newPrice", "updater")
    assert [tuple(e["args"][n] for n in names) for e in prices] == [
        (steth, 999 * 10**15, 999 * 10**15, oracle.address),
        (cbeth, 109 * 10**16, 110 * 10**16, oracle.address),
    ]
    (global_update,) = oracle.events.GlobalPricesUpdated().get_logs(
        from_block=block, to_block=block
    )
    assert dict(global_update["args"]) == {"updater": lt.address, "timestamp": timestamp}
    (deposited,) = lt.events.AssetDeposited().get_logs(from_block=block, to_block=block)
    assert deposited["args"]["shares"] == expected
    assert oracle.functions.arePricesStale().call() is False
    assert oracle.functions.lastPriceUpdate().call() == timestamp


def test_a_failing_price_source_fails_a_stale_deposit(chain: Chain) -> None:
    eth = lat_contracts(chain, "latETH")
    lt, oracle = eth["lt"], eth["oracle"]
    cbeth, steth = eth["tokens"]["cbETH"], eth["tokens"]["stETH"].address
    owner, sender = chain.account(0), chain.account(FRESH)
    # A feed answering 0 gives no price (and cbETH has no fallback source).
    mined(chain, rate_feed(chain, eth, "cbETH").functions.setAnswer(0).transact({"from": owner}))
    mined(chain, cbeth.functions.mint(sender, 10**6).transact({"from": sender}))
    mined(chain, cbeth.functions.approve(lt.address, 10**6).transact({"from": sender}))
    deposit = lt.functions.deposit([cbeth.address], [10**6], sender)
    # While prices are fresh the stored price serves.
    assert deposit.call({"from": sender})[0] > 0

    chain.rpc("evm_increaseTime", 86_401)
    chain.rpc("evm_mine")
    with pytest.raises(ContractCustomError) as excinfo:
        deposit.call({"from": sender})
    assert revert_of(excinfo) == ("PriceUpdateFailed", ())
    assert excinfo.value.data == "0x" + Web3.keccak(text="PriceUpdateFailed()")[
        :4
    ].hex().removeprefix("0x")
    # The oracle's own refresh names the token without a price.
    with pytest.raises(ContractCustomError) as excinfo:
        oracle.functions.updateAllPricesIfNeeded().call({"from": owner})
    assert revert_of(excinfo) == ("NoFreshPrice", (cbeth.address,))
    # A refresh by someone without the rate updater role is refused.
    with pytest.raises(ContractCustomError) as excinfo:
        oracle.functions.updateAllPricesIfNeeded().call({"from": sender})
    assert revert_of(excinfo) == ("InvalidUpdater", (sender,))
    assert steth  # stETH's source still answers; one failing source fails the whole refresh


@pytest.fixture(scope="module")
def older_devnet() -> Iterator[Chain]:
    """The demo LATs deployed with the older, v1.0.2-shaped contracts (OpenZeppelin 5 errors),
    on an anvil of their own."""
    from tests.conftest import Chain

    node = start_anvil(timestamp=devnet_genesis())
    try:
        manifests = deploy_devnet(node.url, variant=V1_0_2)
        yield Chain(node.url, connect(node.url), manifests, "multicall3")
    finally:
        node.stop()


def test_the_older_variant_lacks_the_newer_functions(older_devnet: Chain) -> None:
    chain = older_devnet
    manifest = chain.lat("latETH")
    proxies = manifest["contractDeployments"]["proxy"]
    steth, cbeth = (t["address"] for t in manifest["tokens"])
    # Called through the current ABI, the newer views revert (no such function, no fallback).
    current_lt = chain.contract("LiquidToken", manifest["proxyAddress"]).functions
    current_ltm = chain.contract("LiquidTokenManager", proxies["liquidTokenManager"]["address"])
    current_oracle = chain.contract(
        "TokenRegistryOracle", proxies["tokenRegistryOracle"]["address"]
    )
    for missing in (
        current_lt.tokenRegistryOracle(),
        current_ltm.functions.getDepositAssetBalance(steth),
        current_ltm.functions.getWithdrawableAssetBalance(steth),
        current_oracle.functions.arePricesStale(),
        current_oracle.functions.lastPriceUpdate(),
    ):
        with pytest.raises(ContractLogicError):
            missing.call()
    # What chain.md's reads need otherwise answers, with the same history as Mainnet v1's.
    ltm = chain.contract("LiquidTokenManagerV102", proxies["liquidTokenManager"]["address"])
    node0_steth = 7_619_047_619_047_619_047 * STETH_RATE // WAD
    node1_steth_net = 3_428_571_428_571_428_570 * STETH_RATE // WAD
    assert ltm.functions.getStakedAssetBalance(steth).call() == node0_steth + node1_steth_net
    assert ltm.functions.getTokenInfo(cbeth).call() == (6, 109 * 10**16, 0)
    assert current_lt.totalAssets().call() == ETH_TOTAL_ASSETS
    assert current_lt.totalSupply().call() == ETH_SUPPLY
    assert current_oracle.functions.getRate(steth).call() == 999 * 10**15


def test_the_older_variant_reverts_with_openzeppelin_5_errors(older_devnet: Chain) -> None:
    chain = older_devnet
    manifest = chain.lat("latETH")
    lt = chain.contract("LiquidTokenV102", manifest["proxyAddress"])
    steth = manifest["tokens"][0]["address"]
    with pytest.raises(ContractCustomError) as excinfo:
        lt.functions.pause().call({"from": chain.account(FRESH)})
    assert revert_of(excinfo) == (
        "AccessControlUnauthorizedAccount", (chain.account(FRESH), PAUSER_ROLE),
    )  # fmt: skip
    snapshot = chain.rpc("evm_snapshot")
    try:
        mined(chain, lt.functions.pause().transact({"from": chain.account(0)}))
        with pytest.raises(ContractCustomError) as excinfo:
            make_deposits(chain.url, manifest, FRESH, [steth], [WAD])
        assert revert_of(excinfo) == ("EnforcedPause", ())
    finally:
        chain.rpc("evm_revert", snapshot)


def test_staker_node_limit(chain: Chain) -> None:
    coordinator = lat_contracts(chain, "latBTC")["coordinator"]
    owner = {"from": chain.account(0)}
    mined(chain, coordinator.functions.createStakerNode().transact(owner))
    mined(chain, coordinator.functions.createStakerNode().transact(owner))  # 4 = maxNodes
    with pytest.raises(ContractCustomError) as excinfo:
        coordinator.functions.createStakerNode().call(owner)
    assert revert_of(excinfo) == ("TooManyStakerNodes", (4,))


# ----- helpers for later tests and benchmarks -----


def test_deposit_many_emits_the_requested_number_of_events(chain: Chain) -> None:
    for symbol, event_name in (("latETH", "AssetDeposited"), ("latORB", "Deposit")):
        lat = lat_contracts(chain, symbol)
        start = chain.w3.eth.block_number + 1
        hashes = deposit_many(chain.url, lat["manifest"], 250, per_tx=100)
        assert len(hashes) == 3
        logs = getattr(lat["lt"].events, event_name)().get_logs(from_block=start)
        assert len(logs) == 250
        assert {e["args"]["receiver"] for e in logs} == {chain.account(10)}


def test_multicall3_only_on_the_devnet_that_has_it(chain: Chain) -> None:
    code = chain.w3.eth.get_code(MULTICALL3_ADDRESS)
    if not chain.multicall:
        assert code == b""  # the plain devnet has no helper contract at all
        return
    assert code == bytes.fromhex(
        load_artifacts()["Multicall3"]["deployedBytecode"].removeprefix("0x")
    )
    multicall = chain.contract("Multicall3", MULTICALL3_ADDRESS)
    lt = lat_contracts(chain, "latETH")["lt"]
    calls = [
        (lt.address, False, lt.encode_abi("totalSupply", [])),
        (lt.address, True, b"\x00\x00\x00\x00"),  # no such function: reverts
    ]
    (ok1, data1), (ok2, _) = multicall.functions.aggregate3(calls).call()
    assert (ok1, ok2) == (True, False)
    assert int.from_bytes(data1, "big") == lt.functions.totalSupply().call()
    assert multicall.functions.getBlockNumber().call() == chain.w3.eth.block_number
    with pytest.raises(ContractLogicError, match="Multicall3: call failed"):
        multicall.functions.aggregate3([(lt.address, False, b"\x00\x00\x00\x00")]).call()


# ----- the AVSs' world: EigenLayer's functions for the rewards APY, and the chain's days -----

# chain.md's signatures (EigenLayer at f84a515), as the compiled ABIs must have them.
EIGENLAYER_SIGNATURES = {
    "DelegationManager": {
        "functions": {
            "getOperatorsShares(address[],address[]) view returns (uint256[][])",
            "operatorShares(address,address) view returns (uint256)",
            "delegatedTo(address) view returns (address)",
            "getWithdrawableShares(address,address[]) view returns (uint256[],uint256[])",
        },
        "events": {
            "OperatorSharesIncreased(address indexed,address,address,uint256)",
            "OperatorSharesDecreased(address indexed,address,address,uint256)",
            "StakerDelegated(address indexed,address indexed)",
            "StakerUndelegated(address indexed,address indexed)",
        },
    },
    "AVSDirectory": {
        "functions": {
            "registerOperatorToAVS(address,(bytes,bytes32,uint256)) nonpayable returns ()",
            "deregisterOperatorFromAVS(address) nonpayable returns ()",
            "avsOperatorStatus(address,address) view returns (uint8)",
            "updateAVSMetadataURI(string) nonpayable returns ()",
        },
        "events": {
            "OperatorAVSRegistrationStatusUpdated(address indexed,address indexed,uint8)",
            "AVSMetadataURIUpdated(address indexed,string)",
        },
    },
    "RewardsCoordinator": {
        "functions": {
            "activationDelay() view returns (uint32)",
            "setActivationDelay(uint32) nonpayable returns ()",
            "defaultOperatorSplitBips() view returns (uint16)",
            "getOperatorAVSSplit(address,address) view returns (uint16)",
            "setOperatorAVSSplit(address,address,uint16) nonpayable returns ()",
            "createAVSRewardsSubmission(((address,uint96)[],address,uint256,uint32,uint32)[])"
            " nonpayable returns ()",
            "createRewardsForAllSubmission(((address,uint96)[],address,uint256,uint32,uint32)[])"
            " nonpayable returns ()",
            "createOperatorDirectedAVSRewardsSubmission(address,((address,uint96)[],address,"
            "(address,uint256)[],uint32,uint32,string)[]) nonpayable returns ()",
        },
        "events": {
            "AVSRewardsSubmissionCreated(address indexed,uint256 indexed,bytes32 indexed,"
            "((address,uint96)[],address,uint256,uint32,uint32))",
            "RewardsSubmissionForAllCreated(address indexed,uint256 indexed,bytes32 indexed,"
            "((address,uint96)[],address,uint256,uint32,uint32))",
            "OperatorDirectedAVSRewardsSubmissionCreated(address indexed,address indexed,"
            "bytes32 indexed,uint256,((address,uint96)[],address,(address,uint256)[],uint32,"
            "uint32,string))",
            "OperatorAVSSplitBipsSet(address indexed,address indexed,address indexed,uint32,"
            "uint16,uint16)",
            "DefaultOperatorSplitBipsSet(uint16,uint16)",
            "ActivationDelaySet(uint32,uint32)",
        },
        "errors": {"PreviousSplitPending()", "SubmissionNotRetroactive()"},
    },
    "ServiceManager": {
        "functions": {
            "getOperatorRestakedStrategies(address) view returns (address[])",
            "updateAVSMetadataURI(string) nonpayable returns ()",
        },
    },
}
OD_SUBMISSION = "((address,uint96)[],address,(address,uint256)[],uint32,uint32,string)"
REGISTERED, UNREGISTERED = 1, 0


def test_eigenlayer_stand_ins_have_chain_mds_signatures() -> None:
    from devchain.upstream_abi import signatures

    for name, expected in EIGENLAYER_SIGNATURES.items():
        found = signatures(load_artifacts()[name]["abi"])
        for kind, wanted in expected.items():
            assert wanted <= set(found[kind]), f"{name} {kind}"


def core_contracts(chain: Chain) -> dict[str, Any]:
    eigenlayer = chain.lat("latETH")["eigenlayer"]
    return {
        "dm": chain.contract("DelegationManager", eigenlayer["delegationManager"]),
        "sm": chain.contract("StrategyManager", eigenlayer["strategyManager"]),
        "rc": chain.contract("RewardsCoordinator", eigenlayer["rewardsCoordinator"]),
        "directory": chain.contract("AVSDirectory", eigenlayer["avsDirectory"]),
        "service_manager": chain.contract("ServiceManager", AVS_ETH),
    }


def block_time(chain: Chain, event: Any) -> int:
    return int(chain.w3.eth.get_block(event["blockNumber"])["timestamp"])


def test_eth_lats_avs_is_a_service_manager_owned_by_account_7(chain: Chain) -> None:
    core = core_contracts(chain)
    manager = core["service_manager"]
    assert chain.lat("latETH")["avsAddress"] == AVS_ETH
    # Account 7's first transaction deployed it (CREATE from nonce 0).
    assert AVS_ETH == Web3.to_checksum_address(
        Web3.keccak(bytes.fromhex("d694" + AVS_ETH_OWNER[2:].lower() + "80"))[12:]
    )
    assert chain.w3.eth.get_code(AVS_ETH) == bytes.fromhex(
        load_artifacts()["ServiceManager"]["deployedBytecode"].removeprefix("0x")
    )
    assert manager.functions.owner().call() == AVS_ETH_OWNER == chain.account(7)
    assert manager.functions.avsDirectory().call() == core["directory"].address
    assert manager.functions.rewardsCoordinator().call() == core["rc"].address
    # The AVSs of latORB and latBTC are accounts, without code.
    assert [chain.lat(s)["avsAddress"] for s in ("latORB", "latBTC")] == [AVS_ORB, AVS_BTC]
    assert chain.w3.eth.get_code(AVS_ORB) == chain.w3.eth.get_code(AVS_BTC) == b""

    stranger = {"from": chain.account(FRESH)}
    for call in (
        manager.functions.updateAVSMetadataURI("data:,"),
        manager.functions.registerOperatorToAVS(OPERATOR_21),
        manager.functions.deregisterOperatorFromAVS(OPERATOR_4),
        manager.functions.setOperatorRestakedStrategies(OPERATOR_21, []),
        manager.functions.createAVSRewardsSubmission([]),
        manager.functions.createOperatorDirectedAVSRewardsSubmission([]),
    ):
        with pytest.raises(ContractCustomError) as excinfo:
            call.call(stranger)
        assert revert_of(excinfo) == ("OwnableUnauthorizedAccount", (chain.account(FRESH),))


def test_registrations_and_restaked_strategies(chain: Chain) -> None:
    core = core_contracts(chain)
    directory, manager = core["directory"].functions, core["service_manager"].functions
    eth = lat_contracts(chain, "latETH")
    steth, cbeth = eth["strategies"]["stETH"].address, eth["strategies"]["cbETH"].address
    first = devnet_first_day(chain.w3, chain.lat("latETH"))

    events = core["directory"].events.OperatorAVSRegistrationStatusUpdated().get_logs(from_block=0)
    found = [(e["args"]["operator"], e["args"]["avs"], e["args"]["status"]) for e in events]
    assert [(*f, utc_day(block_time(chain, e))) for f, e in zip(found, events, strict=True)] == [
        (OPERATOR_4, AVS_ETH, REGISTERED, first),
        (OPERATOR_6, AVS_ETH, REGISTERED, first),
        (OPERATOR_20, AVS_ETH, REGISTERED, first),
        (OPERATOR_5, AVS_ORB, REGISTERED, first),
        (OPERATOR_6, AVS_ORB, REGISTERED, first),
        (OPERATOR_5, AVS_ETH, REGISTERED, scripted_day(first, 2)),
        (OPERATOR_6, AVS_ETH, UNREGISTERED, scripted_day(first, 8)),
    ]  # fmt: skip
    status = {
        (avs, operator): directory.avsOperatorStatus(avs, operator).call()
        for avs in (AVS_ETH, AVS_ORB, AVS_BTC)
        for operator in (OPERATOR_4, OPERATOR_5, OPERATOR_6, OPERATOR_20, OPERATOR_21)
    }
    assert {key for key, value in status.items() if value == REGISTERED} == {
        (AVS_ETH, OPERATOR_4), (AVS_ETH, OPERATOR_5), (AVS_ETH, OPERATOR_20),
        (AVS_ORB, OPERATOR_5), (AVS_ORB, OPERATOR_6),
    }  # fmt: skip

    restaked = manager.getOperatorRestakedStrategies
    assert restaked(OPERATOR_4).call() == [steth, cbeth]
    assert restaked(OPERATOR_5).call() == [steth, cbeth]
    assert restaked(OPERATOR_6).call() == [steth]  # as set, though deregistered since
    assert restaked(OPERATOR_20).call() == [steth, cbeth]
    assert restaked(OPERATOR_21).call() == []  # never registered
    # An AVS that is an account cannot answer.
    orb_as_manager = chain.contract("ServiceManager", AVS_ORB).functions
    with pytest.raises(BadFunctionCallOutput):
        orb_as_manager.getOperatorRestakedStrategies(OPERATOR_5).call()


def test_avs_directory_refuses_what_eigenlayer_refuses(chain: Chain) -> None:
    directory = core_contracts(chain)["directory"].functions
    avs = {"from": AVS_ORB}
    salt = Web3.keccak(text="a salt operator 4 never used")  # a salt is spent across AVSs
    signature = (b"", salt, 2**256 - 1)
    cases = [
        (directory.registerOperatorToAVS(OPERATOR_5, signature), "OperatorAlreadyRegisteredToAVS"),
        (directory.registerOperatorToAVS(FRESH_ADDRESS, signature),
         "OperatorNotRegisteredToEigenLayer"),
        (directory.registerOperatorToAVS(OPERATOR_4, (b"", salt, 1)), "SignatureExpired"),
        (directory.deregisterOperatorFromAVS(OPERATOR_4), "OperatorNotRegisteredToAVS"),
    ]  # fmt: skip
    for call, error in cases:
        with pytest.raises(ContractCustomError) as excinfo:
            call.call(avs)
        assert revert_of(excinfo) == (error, ())
    # A salt is spent once per operator.
    mined(chain, directory.registerOperatorToAVS(OPERATOR_4, signature).transact(avs))
    mined(chain, directory.deregisterOperatorFromAVS(OPERATOR_4).transact(avs))
    with pytest.raises(ContractCustomError) as excinfo:
        directory.registerOperatorToAVS(OPERATOR_4, signature).call(avs)
    assert revert_of(excinfo) == ("SaltSpent", ())


def test_operator_directed_submission_decoded_with_web3(chain: Chain) -> None:
    core = core_contracts(chain)
    rc = core["rc"]
    eth = lat_contracts(chain, "latETH")
    steth_token = eth["tokens"]["stETH"].address
    strategies = sorted(
        (eth["strategies"][s].address for s in ("stETH", "cbETH")), key=lambda a: int(a, 16)
    )
    first = devnet_first_day(chain.w3, chain.lat("latETH"))

    (event,) = rc.events.OperatorDirectedAVSRewardsSubmissionCreated().get_logs(from_block=0)
    args = event["args"]
    assert (args["caller"], args["avs"], args["submissionNonce"]) == (AVS_ETH, AVS_ETH, 1)
    submission = args["operatorDirectedRewardsSubmission"]
    assert [(x["strategy"], x["multiplier"]) for x in submission["strategiesAndMultipliers"]] == [
        (s, WAD) for s in strategies
    ]
    assert submission["token"] == steth_token
    # Sorted by operator address: 4 (0x15d3...) before 5 (0x9965...).
    assert [(r["operator"], r["amount"]) for r in submission["operatorRewards"]] == [
        (OPERATOR_4, 3 * WAD // 100), (OPERATOR_5, WAD // 100),
    ]  # fmt: skip
    assert (submission["startTimestamp"], submission["duration"]) == (first, 3 * DAY)
    assert submission["description"] == "devnet operator-directed"
    assert utc_day(block_time(chain, event)) == scripted_day(first, 5)
    encoded = abi_encode(
        ["address", "uint256", OD_SUBMISSION],
        [AVS_ETH, 1, ([(s, WAD) for s in strategies], steth_token,
                      [(OPERATOR_4, 3 * WAD // 100), (OPERATOR_5, WAD // 100)], first, 3 * DAY,
                      "devnet operator-directed")],
    )  # fmt: skip
    assert args["operatorDirectedRewardsSubmissionHash"] == Web3.keccak(encoded)
    hashes = rc.functions.isOperatorDirectedAVSRewardsSubmissionHash
    assert hashes(AVS_ETH, Web3.keccak(encoded)).call() is True
    # The coordinator holds what the AVS's submissions in stETH paid: 0.15 on D0, 0.04 directed.
    received = (
        eth["tokens"]["stETH"]
        .events.Transfer()
        .get_logs(from_block=0, argument_filters={"to": rc.address})
    )
    paid = sum(e["args"]["value"] for e in received if e["args"]["from"] == AVS_ETH)
    assert paid == 19 * WAD // 100


def test_avs_submissions_of_the_scripted_days(chain: Chain) -> None:
    core = core_contracts(chain)
    rc = core["rc"]
    eth = lat_contracts(chain, "latETH")
    steth, cbeth = eth["strategies"]["stETH"].address, eth["strategies"]["cbETH"].address
    first = devnet_first_day(chain.w3, chain.lat("latETH"))

    events = rc.events.AVSRewardsSubmissionCreated().get_logs(from_block=0)
    later = [e for e in events if e["args"]["submissionNonce"] >= 2]
    assert [utc_day(block_time(chain, e)) for e in later] == [
        scripted_day(first, 6), scripted_day(first, 7),
    ]  # fmt: skip
    cbeth_sub, rwd_sub = (e["args"]["rewardsSubmission"] for e in later)
    assert cbeth_sub["token"] == eth["tokens"]["cbETH"].address
    assert cbeth_sub["amount"] == 6 * 10**4
    assert sorted(
        (x["strategy"], x["multiplier"]) for x in cbeth_sub["strategiesAndMultipliers"]
    ) == sorted([(steth, WAD), (cbeth, 2 * WAD)])
    assert (cbeth_sub["startTimestamp"], cbeth_sub["duration"]) == (
        scripted_day(first, 6), 3 * DAY,
    )  # fmt: skip
    rwd = chain.contract("TestERC20", rwd_sub["token"]).functions
    assert (rwd.name().call(), rwd.symbol().call(), rwd.decimals().call()) == (
        "Devnet Reward", "RWD", 18,
    )  # fmt: skip
    assert rwd_sub["amount"] == 1000 * WAD
    assert [(x["strategy"], x["multiplier"]) for x in rwd_sub["strategiesAndMultipliers"]] == [
        (steth, WAD)
    ]
    assert (rwd_sub["startTimestamp"], rwd_sub["duration"]) == (scripted_day(first, 7), 2 * DAY)
    # RWD is in no LAT and has no price feed.
    for manifest in chain.manifests:
        assert rwd_sub["token"] not in {t["address"] for t in manifest["tokens"]}
        assert rwd_sub["token"] not in manifest["priceFeeds"]

    # The rewards for every staker, by the coordinator's owner: a kind the service only notices.
    (for_all,) = rc.events.RewardsSubmissionForAllCreated().get_logs(from_block=0)
    args = for_all["args"]
    assert (args["submitter"], args["submissionNonce"]) == (chain.account(0), 0)
    assert rc.functions.owner().call() == chain.account(0)
    assert utc_day(block_time(chain, for_all)) == scripted_day(first, 9)
    submission = args["rewardsSubmission"]
    steth_token = eth["tokens"]["stETH"].address
    assert (submission["token"], submission["amount"]) == (steth_token, WAD // 100)
    assert (submission["startTimestamp"], submission["duration"]) == (scripted_day(first, 9), DAY)
    with pytest.raises(ContractCustomError) as excinfo:
        rc.functions.createRewardsForAllSubmission([]).call({"from": AVS_ORB})
    assert revert_of(excinfo) == ("OwnableUnauthorizedAccount", (AVS_ORB,))


def test_rewards_coordinator_checks_submissions_as_eigenlayer_does(chain: Chain) -> None:
    rc = core_contracts(chain)["rc"].functions
    orb = lat_contracts(chain, "latORB")
    token, strategy = orb["tokens"]["ORB"].address, orb["strategies"]["ORB"].address
    steth = lat_contracts(chain, "latETH")["strategies"]["stETH"].address
    avs = {"from": AVS_ORB}
    now = chain.w3.eth.get_block("latest")["timestamp"]
    today = utc_day(now)
    two = sorted([strategy, steth], key=lambda a: int(a, 16))

    def plain(strategies: list[str], start: int, duration: int) -> tuple:
        return ([(s, WAD) for s in strategies], token, WAD, start, duration)

    cases = [
        (rc.createAVSRewardsSubmission([plain([strategy], today + 1, DAY)]),
         "InvalidStartTimestampRemainder"),
        (rc.createAVSRewardsSubmission([plain([strategy], today, DAY + 1)]),
         "InvalidDurationRemainder"),
        (rc.createAVSRewardsSubmission([plain([strategy], today, 0)]), "DurationIsZero"),
        (rc.createAVSRewardsSubmission([plain([], today, DAY)]), "InputArrayLengthZero"),
        (rc.createAVSRewardsSubmission([plain(two[::-1], today, DAY)]),
         "StrategiesNotInAscendingOrder"),
    ]  # fmt: skip
    rewards = sorted([(OPERATOR_5, WAD), (OPERATOR_6, WAD)], key=lambda r: int(r[0], 16))

    def directed(operator_rewards: list, start: int, duration: int) -> tuple:
        return ([(strategy, WAD)], token, operator_rewards, start, duration, "")

    cases += [
        (rc.createOperatorDirectedAVSRewardsSubmission(
            AVS_ORB, [directed(rewards, today, DAY)]), "SubmissionNotRetroactive"),
        (rc.createOperatorDirectedAVSRewardsSubmission(
            AVS_ORB, [directed(rewards[::-1], today - 2 * DAY, DAY)]),
         "OperatorsNotInAscendingOrder"),
        (rc.createOperatorDirectedAVSRewardsSubmission(
            AVS_ORB, [directed([(OPERATOR_5, 0)], today - 2 * DAY, DAY)]), "AmountIsZero"),
    ]  # fmt: skip
    for call, error in cases:
        with pytest.raises(ContractCustomError) as excinfo:
            call.call(avs)
        assert revert_of(excinfo) == (error, ())
    # Only the AVS itself submits for the AVS.
    call = rc.createOperatorDirectedAVSRewardsSubmission(
        AVS_ORB, [directed(rewards, today - 2 * DAY, DAY)]
    )
    with pytest.raises(ContractCustomError) as excinfo:
        call.call({"from": AVS_BTC})
    assert revert_of(excinfo) == ("UnauthorizedCaller", (AVS_BTC,))


def test_split_activation(chain: Chain) -> None:
    rc = core_contracts(chain)["rc"]
    first = devnet_first_day(chain.w3, chain.lat("latETH"))
    events = rc.events.OperatorAVSSplitBipsSet().get_logs(from_block=0)
    names = ("caller", "operator", "avs", "oldOperatorAVSSplitBips", "newOperatorAVSSplitBips")
    assert [tuple(e["args"][n] for n in names) for e in events] == [
        (OPERATOR_4, OPERATOR_4, AVS_ETH, 1000, 500),  # the default before
        (OPERATOR_6, OPERATOR_6, AVS_ORB, 1000, 2500),
        (OPERATOR_4, OPERATOR_4, AVS_BTC, 1000, 0),
        (OPERATOR_4, OPERATOR_4, AVS_ETH, 500, 2000),
    ]
    # The devnet's activation delay is 0: each split is in force from its own block on.
    assert [e["args"]["activatedAt"] for e in events] == [block_time(chain, e) for e in events]
    assert [utc_day(block_time(chain, e)) for e in events] == [first] * 3 + [scripted_day(first, 4)]
    assert [(e["args"]["oldActivationDelay"], e["args"]["newActivationDelay"]) for e in
            rc.events.ActivationDelaySet().get_logs(from_block=0)] == [
        (0, 7 * DAY),  # the coordinator's own default
        (7 * DAY, 0),  # the devnet's
    ]  # fmt: skip
    assert rc.functions.activationDelay().call() == 0
    split = rc.functions.getOperatorAVSSplit
    change = events[-1]["blockNumber"]
    assert split(OPERATOR_4, AVS_ETH).call(block_identifier=change - 1) == 500
    assert split(OPERATOR_4, AVS_ETH).call(block_identifier=change) == 2000

    # With a delay, the split in force before stays until activatedAt, and no other may be set.
    owner, operator = {"from": chain.account(0)}, {"from": OPERATOR_5}
    mined(chain, rc.functions.setActivationDelay(DAY).transact(owner))
    receipt = mined(chain, rc.functions.setOperatorAVSSplit(OPERATOR_5, AVS_ORB, 300).transact(
        operator))  # fmt: skip
    (first_set,) = rc.events.OperatorAVSSplitBipsSet().process_receipt(receipt)
    set_at = chain.w3.eth.get_block(receipt["blockNumber"])["timestamp"]
    assert first_set["args"]["activatedAt"] == set_at + DAY
    assert split(OPERATOR_5, AVS_ORB).call() == 1000  # a first split: the default until then
    with pytest.raises(ContractCustomError) as excinfo:
        rc.functions.setOperatorAVSSplit(OPERATOR_5, AVS_ORB, 400).call(operator)
    assert revert_of(excinfo) == ("PreviousSplitPending", ())
    chain.rpc("evm_increaseTime", DAY)
    chain.rpc("evm_mine")
    assert split(OPERATOR_5, AVS_ORB).call() == 300  # from activatedAt on
    chain.rpc("evm_increaseTime", 1)  # another may be set once activatedAt is past
    chain.rpc("evm_mine")
    receipt = mined(chain, rc.functions.setOperatorAVSSplit(OPERATOR_5, AVS_ORB, 400).transact(
        operator))  # fmt: skip
    (second_set,) = rc.events.OperatorAVSSplitBipsSet().process_receipt(receipt)
    assert (second_set["args"]["oldOperatorAVSSplitBips"], split(OPERATOR_5, AVS_ORB).call()) == (
        300, 300,
    )  # fmt: skip


def test_get_operators_shares_equals_operator_shares(chain: Chain) -> None:
    dm = core_contracts(chain)["dm"].functions
    operators = [OPERATOR_4, OPERATOR_5, OPERATOR_6, OPERATOR_20, OPERATOR_21]
    strategies = {
        symbol: strategy.address
        for lat in ("latETH", "latORB", "latBTC")
        for symbol, strategy in lat_contracts(chain, lat)["strategies"].items()
    }
    order = list(strategies.values())
    rows = dm.getOperatorsShares(operators, order).call()
    assert rows == [[dm.operatorShares(o, s).call() for s in order] for o in operators]
    # By hand, for stETH and cbETH (tests/devnet_values.py).
    by_operator = dict(zip((4, 5, 6, 20, 21), rows, strict=True))
    steth, cbeth = order.index(strategies["stETH"]), order.index(strategies["cbETH"])
    assert {o: row[steth] for o, row in by_operator.items()} == OPERATOR_STETH_SHARES
    assert {o: row[cbeth] for o, row in by_operator.items()} == OPERATOR_CBETH_SHARES
    assert dm.getOperatorsShares([], order).call() == []


def test_stakers_outside_the_lats(chain: Chain) -> None:
    core = core_contracts(chain)
    dm, sm = core["dm"].functions, core["sm"].functions
    eth = lat_contracts(chain, "latETH")
    steth, cbeth = eth["strategies"]["stETH"].address, eth["strategies"]["cbETH"].address
    expected = {22: OPERATOR_4, 23: OPERATOR_6, 24: OPERATOR_20, 25: OPERATOR_21}
    for index, operator in expected.items():
        staker = chain.account(index)
        assert dm.delegatedTo(staker).call() == operator
        shares = sm.stakerDepositShares(staker, steth).call()
        assert shares == OUTSIDE_STETH[index] * WAD * WAD // STETH_RATE
    assert sm.stakerDepositShares(chain.account(22), cbeth).call() == 20 * 10**6 * WAD // CBETH_RATE
    assert sm.stakerDepositShares(chain.account(24), cbeth).call() == 30 * 10**6 * WAD // CBETH_RATE
    assert sm.stakerDepositShares(chain.account(23), cbeth).call() == 0
    # Operators 20 and 21 are EigenLayer operators that no LAT's node is delegated to.
    assert dm.isOperator(OPERATOR_20).call()
    assert dm.isOperator(OPERATOR_21).call()
    for manifest in chain.manifests:
        coordinator = chain.contract(
            "StakerNodeCoordinator",
            manifest["contractDeployments"]["proxy"]["stakerNodeCoordinator"]["address"],
        )
        for node_address in coordinator.functions.getAllNodes().call():
            assert dm.delegatedTo(node_address).call() not in (OPERATOR_20, OPERATOR_21)


def test_the_chains_days(chain: Chain) -> None:
    """Every devnet transaction on its UTC day, from 01:00 on, one second apart; the scripted
    days all before the day the devnet was handed over, when prices were refreshed."""
    w3 = chain.w3
    manifest = chain.lat("latETH")
    first = devnet_first_day(w3, manifest)
    core = core_contracts(chain)
    assert all(devnet_first_day(w3, m) == first for m in chain.manifests)

    # D0: the genesis block at 00:00 UTC, then every block one second apart from 01:00 UTC.
    assert w3.eth.get_block(0)["timestamp"] == first
    directory_events = core["directory"].events.OperatorAVSRegistrationStatusUpdated()
    last_of_d0 = directory_events.get_logs(from_block=0)[4]["blockNumber"]  # latORB's 6
    times = [w3.eth.get_block(n)["timestamp"] for n in range(1, last_of_d0 + 1)]
    assert times == [first + DAY_OPENS_AT + i for i in range(len(times))]

    # The scripted days: each event on its day, from 01:00 on.
    rc = core["rc"]
    scripted = {
        2: directory_events.get_logs(from_block=0)[5],
        4: rc.events.OperatorAVSSplitBipsSet().get_logs(from_block=0)[-1],
        5: rc.events.OperatorDirectedAVSRewardsSubmissionCreated().get_logs(from_block=0)[0],
        6: rc.events.AVSRewardsSubmissionCreated().get_logs(from_block=0)[3],
        7: rc.events.AVSRewardsSubmissionCreated().get_logs(from_block=0)[4],
        8: directory_events.get_logs(from_block=0)[6],
        9: rc.events.RewardsSubmissionForAllCreated().get_logs(from_block=0)[0],
    }
    for day, event in scripted.items():
        offset = block_time(chain, event) - scripted_day(first, day)
        assert DAY_OPENS_AT <= offset < DAY_OPENS_AT + 60, day
    # Days 1 and 3 have no transactions: no block at all.
    day_of = {n: utc_day(w3.eth.get_block(n)["timestamp"]) for n in range(1, w3.eth.block_number)}
    assert not {scripted_day(first, 1), scripted_day(first, 3)} & set(day_of.values())

    # Handed over on D0 + HISTORY_DAYS (+ 1 where the deployment crossed midnight), after a
    # refresh of the prices by the price updater at the wall clock's time.
    oracle = lat_contracts(chain, "latETH")["oracle"]
    refresh = oracle.events.GlobalPricesUpdated().get_logs(from_block=0)[-1]
    assert refresh["args"]["updater"] == chain.account(0)
    handed_over = block_time(chain, refresh)
    assert utc_day(handed_over) - first in (HISTORY_DAYS * DAY, (HISTORY_DAYS + 1) * DAY)
    assert max(day_of.values()) <= utc_day(handed_over)
    assert scripted_day(first, 9) < utc_day(handed_over)
    assert handed_over <= chain.w3.eth.get_block("latest")["timestamp"]
    assert oracle.functions.lastPriceUpdate().call() == handed_over
    btc_oracle = lat_contracts(chain, "latBTC")["oracle"].functions
    assert btc_oracle.arePricesStale().call() is False


def test_deploying_on_a_chain_of_today_is_refused() -> None:
    with start_anvil() as node:  # the wall clock's time: later than D0
        with pytest.raises(DevnetError, match="start anvil at devnet_genesis"):
            deploy_devnet(node.url)
        assert connect(node.url).eth.block_number == 0  # nothing deployed


def test_quiet_days_push_the_scripted_days_later() -> None:
    quiet = 35
    days: list[tuple[int, int]] = []
    with start_anvil(timestamp=devnet_genesis(quiet)) as node:
        w3 = connect(node.url)

        def on_day(day: int, manifests: list) -> None:
            days.append((day, w3.eth.block_number))
            assert [m["symbol"] for m in manifests] == ["latETH", "latORB", "latBTC"]

        manifests = deploy_devnet(node.url, quiet_days=quiet, on_day=on_day)
        first = devnet_first_day(w3, manifests[0])
        assert [day for day, _ in days] == [30, 35, *range(36, 45)]
        # One block a day at 01:00 UTC for each quiet day, nothing else.
        after_d0 = days[0][1] - 30
        times = [w3.eth.get_block(after_d0 + k)["timestamp"] for k in range(1, quiet + 1)]
        assert times == [first + k * DAY + DAY_OPENS_AT for k in range(1, quiet + 1)]
        assert days[1][1] == after_d0 + quiet
        # The scripted days follow them: operator 5's registration on S+2 = D0 + 37.
        directory = contract(w3, "AVSDirectory", manifests[0]["eigenlayer"]["avsDirectory"])
        event = directory.events.OperatorAVSRegistrationStatusUpdated().get_logs(from_block=0)[5]
        registered = w3.eth.get_block(event["blockNumber"])["timestamp"]
        assert utc_day(registered) == scripted_day(first, 2, quiet_days=quiet) == first + 37 * DAY
