"""The LAT list and detail read path with the read-document cache off (the miss path a live
service takes after every indexed change): one statement per request, and what that one
statement gathers (tokens, their nodes' stakes, the AVS's metadata) adds up as by hand."""

from __future__ import annotations

import pytest

from core.addresses import BEACON_CHAIN_ETH
from tests import factories as f

pytestmark = pytest.mark.django_db

A = f.address
DETAIL = "?withTvl=true&withCuratedMetadata=true&withRewards=true"


@pytest.fixture(autouse=True)
def uncached(settings):
    settings.DOCUMENT_CACHE_SECONDS = 0


@pytest.mark.parametrize(
    "path", ["/lat", "/lat?withGrouping=true", f"/lat/{A(0x1001)}{DETAIL}", f"/lat/{A(0x1001)}"]
)
def test_one_statement_per_request(api, dataset, path, django_assert_num_queries):
    with django_assert_num_queries(1):
        response = api.get(path)
    assert response.status_code == 200, response.content


def test_staked_amounts_beyond_64_bits_are_summed_exactly(api, dataset):
    # Two more nodes of the ETH LAT stake 2**70 and 2**71 units of a 0-decimal token at a price
    # of one ETH a unit: 3 * 2**70 = 3541774862152233910272 units staked, that many ETH.
    big = f.TokenFactory(address=A(0x8B), symbol="BIG", decimals=0)
    f.LatTokenFactory(
        lat=dataset.eth_lat, token=big, strategy_address=A(0x5008), price_per_unit=10**18
    )
    for node_id, amount in ((7, 2**70), (8, 2**71)):
        node = f.StakerNodeFactory(
            lat=dataset.eth_lat, address=A(0x3200 + node_id), node_id=node_id
        )
        f.NodeAssetFactory(node=node, token=big, strategy_address=A(0x5008), staked_amount=amount)
    body = api.get(f"/lat/{A(0x1001)}?withTvl=true").json()
    assert body["tvl"]["tvlAssets"]["BIG"] == 3541774862152233910272.0
    assert body["tvl"]["tvlAssetsEth"]["BIG"] == 3541774862152233910272.0
    # The data set's own stakes: stETH 5 + 3 = 8 ETH, USDx 2000 at 0.0005 ETH = 1 ETH.
    assert body["tvl"]["stakedTvl"] == float(9 + 3 * 2**70)
    assert body["assets"][-1] == {"asset": A(0x8B), "balance": "0", "queuedBalance": "0"}


def test_only_the_lats_own_nodes_and_tokens_count(api, dataset):
    # A node of the native LAT staking stETH, and a node of the ETH LAT staking NAT (a token
    # the ETH LAT does not support): neither moves the ETH LAT's TVL of tests/conftest.py
    # (stETH 10 held + 2 queued + 8 staked, USDx 1000 held + 2000 staked at 0.0005 ETH).
    other = f.StakerNodeFactory(lat=dataset.native_lat, address=A(0x3300), node_id=0)
    f.NodeAssetFactory(
        node=other, token=dataset.steth, strategy_address=A(0x5001), staked_amount=7 * 10**18
    )
    f.NodeAssetFactory(
        node=dataset.node2, token=dataset.nat, strategy_address=A(0x5003), staked_amount=9 * 10**18
    )
    tvl = api.get(f"/lat/{A(0x1001)}?withTvl=true").json()["tvl"]
    assert tvl["tvlAssets"] == {"stETH": 20.0, "USDx": 3000.0}
    assert tvl["stakedTvl"] == 9.0
    # The native LAT: 100 NAT held and now 7 stETH staked, which it does not support either.
    native = api.get(f"/lat/{A(0x1002)}?withTvl=true").json()["tvl"]
    assert native["tvlAssets"] == {"NAT": 100.0}
    assert native["stakedTvl"] == 0.0


def test_lat_without_tokens(api, dataset):
    f.LatFactory(
        proxy_address=A(0x1009),
        implementation_address=A(0x2009),
        name="Bare LAT",
        symbol="bLAT",
        avs=dataset.avs,
        base_asset=BEACON_CHAIN_ETH,
        contract_deployments={},
    )
    listed = api.get("/lat").json()["data"]
    assert [lat["symbol"] for lat in listed] == ["eLAT", "nLAT", "bLAT"]
    assert listed[2]["tokens"] == []
    assert listed[2]["contractDeployments"] == {"implementation": {}, "proxy": {}}
    body = api.get(f"/lat/{A(0x1009)}{DETAIL}").json()
    assert body["tokens"] == []
    assert body["assets"] == []
    assert body["tvl"] == {
        "tvl": 0.0,
        "unstakedTvl": 0.0,
        "stakedTvl": 0.0,
        "queuedTvl": 0.0,
        "tvlAssets": {},
        "tvlAssetsEth": {},
    }
    assert body["curatedMetadata"]["avsAddress"] == A(0xA1)
    assert body["curatedMetadata"]["tags"] == ["oracle", "restaking"]
    assert body["apys"]["current"] == {
        "apy": "0",
        "baseApy": "0",
        "nativeApy": "0",
        "totalApy": "0",
    }
