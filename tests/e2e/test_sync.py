"""lat_import + lat_sync against the devnet on anvil, then endpoints 1-13 against the contracts.

Every expected value is read independently from the contracts with web3 in the test (or
worked out by hand from the devnet script), never from the service's own tables.
"""

from __future__ import annotations

import json
import time
from decimal import Decimal
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from web3 import Web3

from deposits.models import Deposit, DepositCheckpoint
from devchain.devnet import DEMO_LATS, deposit_many, make_deposits, write_manifests
from lats.models import Lat, SyncStatus
from tests.chainreads import chain_deposits
from tests.served import served_deposits
from tests.storedcounts import assert_deposit_counts_match_rows

pytestmark = [pytest.mark.django_db(transaction=False), pytest.mark.chain]

WAD = 10**18
ZERO = "0x0000000000000000000000000000000000000000"


def c(chain, name: str, address: str):
    return chain.contract(name, address)


def lat_view(chain, manifest: dict[str, Any]) -> dict[str, Any]:
    """What the chain says of one LAT, read with web3."""
    proxies = manifest["contractDeployments"]["proxy"]
    lt = c(chain, "LiquidToken", manifest["proxyAddress"])
    ltm = c(chain, "LiquidTokenManager", proxies["liquidTokenManager"]["address"])
    coordinator = c(chain, "StakerNodeCoordinator", proxies["stakerNodeCoordinator"]["address"])
    tokens = ltm.functions.getSupportedTokens().call()
    infos = {t: ltm.functions.getTokenInfo(t).call() for t in tokens}
    strategies = {t: ltm.functions.getTokenStrategy(t).call() for t in tokens}
    symbols = {t: c(chain, "TestERC20", t).functions.symbol().call() for t in tokens}
    return {
        "lt": lt,
        "ltm": ltm,
        "coordinator": coordinator,
        "tokens": tokens,
        "infos": infos,
        "strategies": strategies,
        "symbols": symbols,
    }


def test_lat_list_and_detail_equal_the_chain(synced, api):
    chain = synced
    body = api.get("/lat").json()["data"]
    assert [lat["proxyAddress"] for lat in body] == sorted(
        m["proxyAddress"] for m in chain.manifests
    )
    for manifest in chain.manifests:
        view = lat_view(chain, manifest)
        lat = next(item for item in body if item["proxyAddress"] == manifest["proxyAddress"])
        assert lat["name"] == view["lt"].functions.name().call()
        assert lat["symbol"] == view["lt"].functions.symbol().call()
        assert lat["avsAddress"] == manifest["avsAddress"]
        assert lat["chainId"] == 31337
        assert lat["maxNodes"] == view["coordinator"].functions.maxNodes().call()
        assert lat["tokens"] == [
            {
                "address": t,
                "strategyAddress": view["strategies"][t],
                "volatilityThreshold": str(view["infos"][t][2]),
                "pricePerUnit": str(view["infos"][t][1]),
                "decimals": view["infos"][t][0],
            }
            for t in sorted(view["tokens"])
        ]
        detail = api.get(f"/lat/{manifest['proxyAddress']}?withTvl=true").json()
        balances = view["lt"].functions.balanceAssets(sorted(view["tokens"])).call()
        queued = view["lt"].functions.balanceQueuedAssets(sorted(view["tokens"])).call()
        assert detail["assets"] == [
            {"asset": t, "balance": str(b), "queuedBalance": str(q)}
            for t, b, q in zip(sorted(view["tokens"]), balances, queued, strict=True)
        ]


def test_eth_lat_tvl_equals_total_assets(synced, api):
    """For an ETH LAT every token is priced in ETH: the TVL is totalAssets()."""
    chain = synced
    manifest = chain.lat("latETH")
    total_assets = c(chain, "LiquidToken", manifest["proxyAddress"]).functions.totalAssets().call()
    tvl = api.get(f"/lat/{manifest['proxyAddress']}?withTvl=true").json()["tvl"]
    assert tvl["tvl"] == pytest.approx(total_assets / WAD, rel=1e-12)
    assert tvl["tvl"] == pytest.approx(
        tvl["unstakedTvl"] + tvl["stakedTvl"] + tvl["queuedTvl"], rel=1e-12
    )


def test_curated_metadata_seeded_from_the_avs_document(synced, api):
    chain = synced
    for spec in DEMO_LATS:
        manifest = chain.lat(spec.symbol)
        body = api.get(f"/lat/{manifest['proxyAddress']}?withCuratedMetadata=true").json()
        meta = body["curatedMetadata"]
        assert meta["avsAddress"] == manifest["avsAddress"]
        assert meta["metadataName"] == spec.avs_metadata["name"]
        assert meta["metadataWebsite"] == spec.avs_metadata["website"]
        assert meta["metadataDescription"] == spec.avs_metadata["description"]
        assert meta["metadataLogo"] == spec.avs_metadata["logo"]
        assert meta["metadataSocial"] == spec.avs_metadata["twitter"]
        assert meta["metadataCommunityChat"] == spec.avs_metadata.get("discord")
        assert meta["metadataMessaging"] is None


def test_staker_nodes_and_operators_equal_the_chain(synced, api):
    chain = synced
    for manifest in chain.manifests:
        view = lat_view(chain, manifest)
        dm = c(chain, "DelegationManager", manifest["eigenlayer"]["delegationManager"])
        nodes = view["coordinator"].functions.getAllNodes().call()
        body = api.get(f"/lat/{manifest['proxyAddress']}/staker-nodes").json()
        assert body["address"] == manifest["proxyAddress"]
        assert body["maxNodes"] == view["coordinator"].functions.maxNodes().call()
        assert len(body["stakerNodes"]) == len(nodes)
        for served in body["stakerNodes"]:
            node = c(chain, "StakerNode", served["address"])
            assert served["nodeId"] == node.functions.getId().call()
            assert served["operatorDelegation"] == node.functions.getOperatorDelegation().call()
            strategies = [view["strategies"][t] for t in view["tokens"]]
            withdrawable, _ = dm.functions.getWithdrawableShares(
                served["address"], strategies
            ).call()
            expected = []
            for token, strategy, shares in zip(
                view["tokens"], strategies, withdrawable, strict=True
            ):
                if shares:
                    staked = (
                        c(chain, "Strategy", strategy)
                        .functions.sharesToUnderlyingView(shares)
                        .call()
                    )
                    expected.append(
                        {
                            "nodeAddress": served["address"],
                            "asset": token,
                            "strategy": strategy,
                            "stakedAmount": str(staked),
                            "coreShares": str(shares),
                        }
                    )
            assert served["assets"] == sorted(expected, key=lambda a: a["asset"])
    delegated = set()
    for manifest in chain.manifests:
        for node in (
            c(
                chain,
                "StakerNodeCoordinator",
                manifest["contractDeployments"]["proxy"]["stakerNodeCoordinator"]["address"],
            )
            .functions.getAllNodes()
            .call()
        ):
            operator = c(chain, "StakerNode", node).functions.getOperatorDelegation().call()
            if operator != ZERO:
                delegated.add(operator)
    assert api.get("/lat/operators").json() == {"data": sorted(delegated)}


def test_fees_average_the_operator_splits(synced, api):
    chain = synced
    manifest = chain.lat("latETH")
    rc = c(chain, "RewardsCoordinator", manifest["eigenlayer"]["rewardsCoordinator"])
    operators = api.get(f"/lat/{manifest['proxyAddress']}/operators").json()["data"]
    splits = [
        rc.functions.getOperatorAVSSplit(o["operator"], manifest["avsAddress"]).call()
        for o in operators
    ]
    assert splits  # the devnet delegates this LAT's nodes
    fees = api.get(f"/lat/{manifest['proxyAddress']}/fees").json()["data"]
    assert fees["avgOperatorPerformanceFee"] == pytest.approx(sum(splits) / len(splits) / 100)


def test_exchange_rates_equal_calculate_amount_and_shares(synced, api):
    chain = synced
    for manifest in chain.manifests:
        view = lat_view(chain, manifest)
        rates = api.get(f"/lat/exchange/{manifest['proxyAddress']}").json()["exchangeRates"]
        for token in view["tokens"]:
            decimals = view["infos"][token][0]
            amount = view["lt"].functions.calculateAmount(token, WAD).call()
            assert rates[view["symbols"][token]] == pytest.approx(amount / 10**decimals, rel=1e-9)
    manifest = chain.lat("latETH")
    view = lat_view(chain, manifest)
    token = view["tokens"][0]
    rates = api.get(f"/lat/exchange/{token}").json()["exchangeRates"]
    shares = view["lt"].functions.calculateShares(token, 10 ** view["infos"][token][0]).call()
    assert rates["latETH"] == pytest.approx(shares / WAD, rel=1e-9)


def test_deposits_equal_the_events(synced, api):
    expected = chain_deposits(synced)
    assert len(expected) >= 9
    assert served_deposits(api) == expected


def test_deposit_after_a_sync_appears_after_the_next(synced, api):
    chain = synced
    manifest = chain.lat("latETH")
    token = manifest["tokens"][0]["address"]
    before = served_deposits(api)
    result = make_deposits(chain.url, manifest, 12, [token], [3 * WAD])
    assert served_deposits(api) == before
    call_command("lat_sync", "--no-progress")
    after = served_deposits(api)
    assert len(after) == len(before) + 1
    assert after[0]["sender"] == chain.account(12)
    assert after[0]["amount"] == str(3 * WAD)
    assert after[0]["shares"] == str(result["shares"][0])
    assert after[0]["createdAtBlock"] == result["blockNumber"]


def test_second_sync_writes_nothing(synced, api):
    time.sleep(1.1)  # the clock moves on; the chain does not: the metrics are the chain's
    with CaptureQueriesContext(connection) as captured:
        call_command("lat_sync", "--no-progress")
    writes = [
        q["sql"]
        for q in captured.captured_queries
        if q["sql"].lstrip().upper().startswith(("INSERT", "UPDATE", "DELETE"))
        and "lats_syncstatus" not in q["sql"]
    ]
    assert writes == []


def test_reorg_leaves_exactly_the_canonical_deposits(synced, api):
    chain = synced
    manifest = chain.lat("latETH")
    token = manifest["tokens"][0]["address"]
    fork = chain.rpc("evm_snapshot")
    make_deposits(chain.url, manifest, 12, [token], [1 * WAD])
    make_deposits(chain.url, manifest, 13, [token], [2 * WAD])
    call_command("lat_sync", "--no-progress")
    assert {d["amount"] for d in served_deposits(api)[:2]} == {str(WAD), str(2 * WAD)}
    # The chain reorganises: those two deposits vanish, three others take their blocks.
    assert chain.rpc("evm_revert", fork)
    for index, amount in ((14, 5), (15, 6), (16, 7)):
        make_deposits(chain.url, manifest, index, [token], [amount * WAD])
    call_command("lat_sync", "--no-progress")
    assert served_deposits(api) == chain_deposits(chain)
    assert Deposit.objects.filter(amount__in=[WAD, 2 * WAD], lat__symbol="latETH").count() == 0
    assert_deposit_counts_match_rows()


def test_many_events_across_ranges(synced, api, settings):
    chain = synced
    settings.LOG_BLOCK_RANGE = 3
    manifest = chain.lat("latBTC")
    deposit_many(chain.url, manifest, 250, per_tx=50)
    call_command("lat_sync", "--no-progress")
    assert served_deposits(api)[:100] == chain_deposits(chain)[:100]
    assert api.get("/metrics/deposits").json()["meta"]["total"] == len(chain_deposits(chain))


def test_import_is_idempotent(synced, tmp_path):
    before = list(Lat.objects.order_by("id").values())
    paths = write_manifests(synced.manifests, tmp_path / "again")
    call_command("lat_import", *map(str, paths))
    assert list(Lat.objects.order_by("id").values()) == before


def test_sync_status_records_success(synced):
    statuses = {(s.lat.symbol, s.job): s for s in SyncStatus.objects.select_related("lat")}
    for manifest in synced.manifests:
        for job in ("state", "deposits", "metadata"):
            status = statuses[(manifest["symbol"], job)]
            assert status.last_error == ""
            assert status.last_success_at is not None
    assert DepositCheckpoint.objects.count() == len(synced.manifests)


def test_import_writes_manifest_fields(synced):
    manifest = synced.lat("latORB")
    lat = Lat.objects.get(proxy_address=manifest["proxyAddress"])
    assert lat.deployment_block == manifest["deploymentBlock"]
    assert lat.delegation_manager == manifest["eigenlayer"]["delegationManager"]
    assert (
        lat.contract_deployments["proxy"]["liquidTokenManager"]
        == (manifest["contractDeployments"]["proxy"]["liquidTokenManager"]["address"])
    )
    feed = next(iter(manifest["priceFeeds"].values()))
    answer = synced.contract("PriceFeed", feed).functions.latestRoundData().call()[1]
    assert Decimal(lat.unit_eth_price) == Decimal(answer)  # an 18-decimal feed
    assert json.loads(json.dumps(lat.contract_deployments))  # stored as plain JSON
    assert Web3.is_checksum_address(lat.base_asset)
