"""GET /yields on anvil, read as DefiLlama's yield server reads an adapter's pools: the checks of
its adapters' test (allowed keys, string fields, finite numbers, token lists of strings, reward
tokens wherever a reward APY is set, unique pool ids), the TVL in USD from an ETH/USD feed on
the chain against the LAT's TVL and the feed's answer as web3 reads them, and the LATs whose USD
value is unknown named in `meta.omitted` with why."""

from __future__ import annotations

import math
from decimal import Decimal

import pytest
from django.core.management import call_command
from web3 import Web3

from devchain.devnet import load_artifacts
from lats.models import PriceFeed

pytestmark = [pytest.mark.django_db, pytest.mark.chain]
DEVNET = pytest.mark.parametrize("devnet_kind", ["multicall3"], indirect=True)

# DefiLlama's yield server: the keys a pool may carry (src/adaptors/test.js).
ALLOWED = {
    "pool", "chain", "project", "symbol", "tvlUsd", "apy", "apyBase", "apyReward",
    "underlyingTokens", "rewardTokens", "poolMeta", "url", "apyBaseBorrow", "apyRewardBorrow",
    "totalSupplyUsd", "supplyCapUsd", "totalBorrowUsd", "ltv", "borrowable", "borrowFactor",
    "debtCeilingUsd", "availableBorrowUsd", "borrowMarketOnly", "mintedCoin", "borrowToken",
    "apyBase7d", "apyRewardFake", "apyRewardBorrowFake", "il7d", "volumeUsd1d", "volumeUsd7d",
    "apyBaseInception", "searchTokenOverride", "isIntrinsicSource", "token", "pricePerShare",
    "routeGroupKey", "underlyingStateKey", "poolKind",
}  # fmt: skip
ETH_USD = 3_123_45000000  # $3,123.45, 8 decimals as Chainlink's ETH / USD


def finite(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def assert_defillama_pools(pools: list[dict]) -> None:
    """The checks DefiLlama's adapter test makes of every pool object."""
    assert len({p["pool"] for p in pools}) == len(pools)  # unique ids
    for pool in pools:
        assert set(pool) <= ALLOWED, set(pool) - ALLOWED
        for key in ("pool", "chain", "project", "symbol"):
            assert isinstance(pool[key], str), key
        assert finite(pool["tvlUsd"])
        assert any(finite(pool.get(k)) for k in ("apy", "apyBase", "apyReward"))
        for key in ("rewardTokens", "underlyingTokens"):
            assert all(isinstance(t, str) for t in pool.get(key) or [])
        if pool.get("apyReward"):
            assert pool["rewardTokens"]
        assert finite(pool["pricePerShare"])
        assert pool["pricePerShare"] >= 0
        assert isinstance(pool["url"], str)


def deploy_feed(chain, answer: int) -> str:
    artifact = load_artifacts()["PriceFeed"]
    factory = chain.w3.eth.contract(abi=artifact["abi"], bytecode=artifact["bytecode"])
    tx = factory.constructor(8, "ETH / USD", answer).transact({"from": chain.account(0)})
    return chain.w3.eth.wait_for_transaction_receipt(tx)["contractAddress"]


@DEVNET
def test_the_pools_pass_defillamas_checks_and_value_tvl_in_usd(synced, api, settings):
    chain = synced
    assert api.get("/yields").json()["data"] == []  # no ETH/USD feed for chain 31337 yet
    omitted = api.get("/yields").json()["meta"]["omitted"]
    assert {o["address"] for o in omitted} == {m["proxyAddress"] for m in chain.manifests}
    assert all(o["reason"].startswith("no ETH/USD price for chain 31337") for o in omitted)

    feed = deploy_feed(chain, ETH_USD)
    settings.ETH_USD_FEEDS = {31337: feed}
    call_command("lat_sync", "--no-progress")
    body = api.get("/yields").json()
    pools = body["data"]
    assert_defillama_pools(pools)
    assert body["meta"]["omitted"] == []
    answer = chain.contract("PriceFeed", feed).functions.latestRoundData().call()[1]
    usd = Decimal(answer) / 10**8
    for manifest in chain.manifests:
        proxy = manifest["proxyAddress"]
        (pool,) = [p for p in pools if p["pool"] == f"{proxy.lower()}-chain 31337"]
        tvl = api.get(f"/lat/{proxy}?withTvl=true").json()["tvl"]["tvl"]
        assert pool["tvlUsd"] == pytest.approx(float(Decimal(str(tvl)) * usd), rel=1e-12)
        lt = chain.contract("LiquidToken", proxy)
        rate = Decimal(lt.functions.totalAssets().call()) / lt.functions.totalSupply().call()
        assert pool["pricePerShare"] == pytest.approx(float(rate), rel=1e-15)
        assert pool["underlyingTokens"] == [
            Web3.to_checksum_address(t["address"]) for t in manifest["tokens"]
        ]
        assert (pool["chain"], pool["symbol"]) == ("Chain 31337", manifest["symbol"])
        assert pool["url"] == f"http://testserver/lat/{proxy}"
        apys = api.get(f"/lat/{proxy}?withRewards=true").json()["apys"]
        assert pool["apyBase"] == float(apys["current"]["nativeApy"])
        assert pool["apyBase7d"] == float(apys["trailing7d"]["nativeApy"])
        assert pool["apyReward"] == float(apys["trailing7d"]["apy"])


@DEVNET
def test_a_lat_without_a_usd_value_is_omitted_with_why(synced, api, settings):
    chain = synced
    settings.ETH_USD_FEEDS = {31337: deploy_feed(chain, ETH_USD)}
    orb = chain.lat("latORB")
    PriceFeed.objects.filter(token_address=orb["baseAsset"]).delete()  # its unit: no ETH price
    call_command("lat_sync", "--no-progress")
    body = api.get("/yields").json()
    assert_defillama_pools(body["data"])
    assert {p["symbol"] for p in body["data"]} == {"latETH", "latBTC"}
    (omitted,) = body["meta"]["omitted"]
    assert (omitted["address"], omitted["symbol"]) == (orb["proxyAddress"], "latORB")
    assert omitted["reason"].startswith("its TVL in ETH is unknown: no price feed for its unit")
