"""Older deployments (chain.md, "Older deployments"): the v1.0.2-shaped devnet LATs, which lack
`LiquidToken.tokenRegistryOracle()` and the oracle's `arePricesStale()` and `lastPriceUpdate()`,
are synced and served with what those functions feed null; the functions missing are detected
once per implementation and named on the sync status."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.core.management import call_command

from chain.errors import ChainCallReverted
from chain.gateway import LT_ORACLE, ORACLE_LAST_UPDATE, ORACLE_STALE, Gateway, gateway_for_url
from chain.results import Block
from devchain.anvil import start_anvil
from devchain.devnet import (
    DEPLOYER,
    PROXY_ADMIN,
    V1_0_2,
    _deploy,
    connect,
    deploy_devnet,
    devnet_genesis,
    service_manifest,
    write_manifests,
)
from tests.conftest import Chain

pytestmark = [pytest.mark.django_db, pytest.mark.chain]

OLDER_MISSING = sorted([LT_ORACLE, ORACLE_STALE, ORACLE_LAST_UPDATE])


@pytest.fixture(scope="module", params=["multicall3", "plain"])
def older_devnet(request: pytest.FixtureRequest) -> Iterator[Chain]:
    """The demo LATs deployed with the v1.0.2-shaped contracts, on an anvil of their own, with
    Multicall3 and without it."""
    node = start_anvil(timestamp=devnet_genesis())
    try:
        published = deploy_devnet(
            node.url, variant=V1_0_2, multicall=request.param == "multicall3", published=True
        )
        manifests = [service_manifest(m) for m in published]
        yield Chain(node.url, connect(node.url), manifests, request.param, published)
    finally:
        node.stop()


@pytest.fixture
def older(older_devnet: Chain, settings, tmp_path) -> Iterator[Chain]:
    """The older devnet's LATs imported; the chain reverted after the test."""
    settings.RPC_URL = older_devnet.url
    snapshot = older_devnet.rpc("evm_snapshot")
    call_command("lat_import", *map(str, write_manifests(older_devnet.manifests, tmp_path)))
    try:
        yield older_devnet
    finally:
        older_devnet.rpc("evm_revert", snapshot)


@pytest.fixture
def detections(monkeypatch) -> list[dict[str, Any]]:
    """Every probe of the chain for missing functions (Gateway.missing_functions), recorded."""
    calls: list[dict[str, Any]] = []
    original = Gateway.missing_functions

    def counting(self, **kwargs):
        calls.append(kwargs)
        return original(self, **kwargs)

    monkeypatch.setattr(Gateway, "missing_functions", counting)
    return calls


def sync() -> None:
    call_command("lat_sync", "--no-progress")


def expected_tokens(chain: Chain, manifest: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each supported token as plain web3 reads it from the v1.0.2-shaped contracts."""
    manager = manifest["contractDeployments"]["proxy"]["liquidTokenManager"]["address"]
    ltm = chain.contract("LiquidTokenManagerV102", manager).functions
    lt = chain.contract("LiquidTokenV102", manifest["proxyAddress"]).functions
    tokens = ltm.getSupportedTokens().call()
    balances = lt.balanceAssets(tokens).call()
    queued = lt.balanceQueuedAssets(tokens).call()
    out = {}
    for token, balance, queue in zip(tokens, balances, queued, strict=True):
        decimals, price, threshold = ltm.getTokenInfo(token).call()
        out[token] = {
            "address": token,
            "strategyAddress": ltm.getTokenStrategy(token).call(),
            "volatilityThreshold": str(threshold),
            "pricePerUnit": str(price),
            "decimals": decimals,
            "balance": str(balance),
            "queuedBalance": str(queue),
            "staked": ltm.getStakedAssetBalance(token).call(),
        }
    return out


def test_the_older_lats_are_served_with_the_unknown_fields_null(older, api, detections) -> None:
    from lats.models import Lat, SyncStatus
    from operators.models import NodeAsset

    sync()
    states = SyncStatus.objects.filter(job="state")
    assert [(s.last_error, s.consecutive_failures) for s in states] == [("", 0)] * 3
    assert all(s.last_success_at is not None for s in states)
    head = older.w3.eth.block_number
    health = {row["address"]: row for row in api.get("/health").json()["checks"]["lats"]}
    for manifest in older.manifests:
        address = manifest["proxyAddress"]
        lat = Lat.objects.get(proxy_address=address)
        assert lat.missing_functions == OLDER_MISSING
        # The manifest's oracle is taken for the LAT's (it has no tokenRegistryOracle()).
        oracle = manifest["contractDeployments"]["proxy"]["tokenRegistryOracle"]["address"]
        assert lat.price_oracle == oracle
        lt = older.contract("LiquidTokenV102", address).functions

        status = api.get(f"/lat/{address}/status").json()["data"]
        assert status["pricesStale"] is None
        assert status["lastPriceUpdate"] is None
        assert status["paused"] is lt.paused().call()
        assert status["stateBlock"] == status["indexedBlock"] == head
        assert status["lastSuccessAt"] is not None
        assert (lat.total_assets, lat.total_supply) == (
            lt.totalAssets().call(),
            lt.totalSupply().call(),
        )

        expected = expected_tokens(older, manifest)
        detail = api.get(f"/lat/{address}", {"withTvl": "true"}).json()
        assert (detail["name"], detail["symbol"]) == (lt.name().call(), lt.symbol().call())
        keys = ("address", "strategyAddress", "volatilityThreshold", "pricePerUnit", "decimals")
        assert detail["tokens"] == [{k: expected[t["address"]][k] for k in keys} for t in
                                    detail["tokens"]]  # fmt: skip
        assert sorted(t["address"] for t in detail["tokens"]) == sorted(expected)
        assert {a["asset"]: (a["balance"], a["queuedBalance"]) for a in detail["assets"]} == {
            t: (e["balance"], e["queuedBalance"]) for t, e in expected.items()
        }
        tokens = api.get(f"/lat/{address}/tokens").json()["data"]
        assert sorted(t["address"] for t in tokens) == sorted(expected)
        # The nodes' stakes (read from the DelegationManager and the strategies) are what the
        # older manager's getStakedAssetBalance says.
        for token, e in expected.items():
            staked = sum(
                int(a.staked_amount)
                for a in NodeAsset.objects.filter(node__lat=lat, token__address=token)
            )
            assert staked == e["staked"]
        assert detail["tvl"]["tvl"] is not None
        # Exchange rates: what calculateAmount gives for one whole LAT, by token symbol.
        rates = api.get(f"/lat/exchange/{address}").json()["exchangeRates"]
        for token, e in expected.items():
            symbol = older.contract("TestERC20", token).functions.symbol().call()
            amount = lt.calculateAmount(token, 10**18).call()
            assert rates[symbol] == pytest.approx(amount / 10 ** e["decimals"])
        # The rest of the LAT answers as usual.
        for path in ("operators", "events", "holders"):
            assert api.get(f"/lat/{address}/{path}").status_code == 200, path

        gaps = health[address]["gaps"]
        for name in OLDER_MISSING:
            assert any(gap.startswith(f"{name} missing on this deployment") for gap in gaps)


def test_detection_runs_once_per_implementation(older, detections) -> None:
    from lats.models import ImplementationFunctions

    sync()
    # Per LAT: its LiquidToken's implementation and its oracle's, each probed once.
    assert len(detections) == 6
    assert ImplementationFunctions.objects.count() == 6
    sync()
    sync()
    assert len(detections) == 6

    # latETH's LiquidToken upgraded to another implementation (the same code at a new
    # address): that one is probed, once; nothing else is.
    manifest = older.lat("latETH")
    published = next(m for m in older.published if m["symbol"] == "latETH")
    new_impl = _deploy(older.w3, "LiquidTokenV102", older.account(DEPLOYER)).address
    admin = older.contract("ProxyAdmin", published["proxyAdminAddress"])
    tx = admin.functions.upgrade(manifest["proxyAddress"], new_impl).transact(
        {"from": older.account(PROXY_ADMIN)}
    )
    assert older.w3.eth.wait_for_transaction_receipt(tx)["status"] == 1
    sync()
    sync()
    assert len(detections) == 7
    assert detections[-1]["implementation"] == new_impl
    assert detections[-1]["names"] == (LT_ORACLE,)
    row = ImplementationFunctions.objects.get(implementation=new_impl)
    assert (row.contract, row.missing) == ("LiquidToken", [LT_ORACLE])


def test_a_mainnet_v1_lat_is_unaffected(detections, synced, api) -> None:
    from lats.models import Lat, SyncStatus

    chain = synced
    assert len(detections) == 6  # probed once each, nothing found missing
    assert not SyncStatus.objects.exclude(last_error="").exists()
    health = {row["address"]: row for row in api.get("/health").json()["checks"]["lats"]}
    for manifest in chain.manifests:
        address = manifest["proxyAddress"]
        lat = Lat.objects.get(proxy_address=address)
        assert lat.missing_functions == []
        lt = chain.contract("LiquidToken", address).functions
        assert lat.price_oracle == lt.tokenRegistryOracle().call()
        oracle = chain.contract("TokenRegistryOracle", lat.price_oracle).functions
        status = api.get(f"/lat/{address}/status").json()["data"]
        assert status["pricesStale"] is oracle.arePricesStale().call()
        assert status["lastPriceUpdate"] is not None
        assert not [gap for gap in health[address]["gaps"] if "missing on this" in gap]
    call_command("lat_sync", "--no-progress")
    assert len(detections) == 6


def test_an_empty_revert_of_a_function_the_code_holds_is_a_failure(chain) -> None:
    """Gateway.missing_functions: missing only where the call reverts without data and the
    implementation's code lacks the selector."""
    manifest = chain.lat("latETH")
    gateway = gateway_for_url(chain.url, timeout=10, multicall=None)
    head = chain.w3.eth.get_block("latest")
    block = Block(head["number"], head["hash"].to_0x_hex(), head["timestamp"])
    proxy = manifest["proxyAddress"]
    oracle = chain.contract("LiquidToken", proxy).functions.tokenRegistryOracle().call()
    impls = gateway.implementations([proxy, oracle], block=block)
    assert impls[proxy] == manifest["implementationAddress"]
    names = (ORACLE_STALE, ORACLE_LAST_UPDATE)
    # The oracle has both views.
    assert (
        gateway.missing_functions(
            address=oracle, implementation=impls[oracle], names=names, block=block
        )
        == set()
    )
    # Asked of the LiquidToken (which has neither), with its own code: missing.
    assert gateway.missing_functions(
        address=proxy, implementation=impls[proxy], names=names, block=block
    ) == set(names)
    # The same empty reverts where the code holds the selectors: a real failure, raised.
    with pytest.raises(ChainCallReverted, match="reverted without data although"):
        gateway.missing_functions(
            address=proxy, implementation=impls[oracle], names=names, block=block
        )
    # A contract that is not a proxy is its own implementation.
    assert gateway.implementations([impls[oracle]], block=block) == {impls[oracle]: impls[oracle]}
