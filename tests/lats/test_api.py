"""Endpoints 1-4 and 9-11 against the hand-written data set of tests/conftest.py."""

from __future__ import annotations

import pytest

from core.addresses import BEACON_CHAIN_ETH
from tests import factories as f
from tests.expected import eth_lat_json, native_lat_json

pytestmark = pytest.mark.django_db

A = f.address


def test_lat_list(api, dataset):
    response = api.get("/lat")
    assert response.status_code == 200
    assert response.json() == {"data": [eth_lat_json(), native_lat_json()]}


def test_lat_list_grouped(api, dataset):
    btc = f.TokenFactory(symbol="WBTC", decimals=8)
    f.LatFactory(proxy_address=A(0x1003), base_asset=btc.address, base_asset_symbol="WBTC")
    response = api.get("/lat", {"withGrouping": "true"})
    assert response.status_code == 200
    data = response.json()["data"]
    assert set(data) == {"ETH", "BTC", "Native"}
    assert data["ETH"] == [eth_lat_json()]
    assert data["Native"] == [native_lat_json()]
    assert [lat["proxyAddress"] for lat in data["BTC"]] == [A(0x1003)]


def test_lat_list_grouped_staff_override_and_empty_groups(api, dataset):
    dataset.native_lat.group_override = "ETH"
    dataset.native_lat.save()
    data = api.get("/lat?withGrouping=true").json()["data"]
    assert [lat["symbol"] for lat in data["ETH"]] == ["eLAT", "nLAT"]
    assert data["BTC"] == []
    assert data["Native"] == []


def test_lat_detail_plain(api, dataset):
    response = api.get(f"/lat/{A(0x1001).lower()}")
    assert response.status_code == 200
    expected = eth_lat_json() | {
        "assets": [
            {
                "asset": A(0x5E),
                "balance": "10000000000000000000",
                "queuedBalance": "2000000000000000000",
            },
            {"asset": A(0x6D), "balance": "1000000000", "queuedBalance": "0"},
        ]
    }
    assert response.json() == expected


def test_lat_detail_with_everything(api, dataset):
    dataset.eth_lat.apys = {
        "current": {"apy": "3.5", "baseApy": "2.75", "nativeApy": "1.2", "totalApy": "6.25"}
    }
    dataset.eth_lat.save()
    response = api.get(
        f"/lat/{A(0x1001)}",
        {"withTvl": "true", "withCuratedMetadata": "true", "withRewards": "true"},
    )
    assert response.status_code == 200
    body = response.json()
    # stETH: 10 held + 2 queued + (5 + 3) staked = 20 tokens at 1 ETH.
    # USDx: 1000 held + 2000 staked = 3000 tokens at 0.0005 ETH = 1.5 ETH.
    assert body["tvl"] == {
        "tvl": 21.5,
        "unstakedTvl": 10.5,
        "stakedTvl": 9.0,
        "queuedTvl": 2.0,
        "tvlAssets": {"stETH": 20.0, "USDx": 3000.0},
        "tvlAssetsEth": {"stETH": 20.0, "USDx": 1.5},
    }
    zero = {"apy": "0", "baseApy": "0", "nativeApy": "0", "totalApy": "0"}
    assert body["apys"] == {
        "current": {"apy": "3.5", "baseApy": "2.75", "nativeApy": "1.2", "totalApy": "6.25"},
        "avg30d": zero,
        "trailing7d": zero,
        "trailing30d": zero,
        "trailing3m": zero,
        "trailing6m": zero,
        "trailing1y": zero,
    }
    assert body["curatedMetadata"] == {
        "avsAddress": A(0xA1),
        "metadataName": "Example AVS",
        "metadataDescription": "Validates examples.",
        "metadataCommunityChat": None,
        "metadataLogo": "https://avs.example/logo.png",
        "metadataMessaging": None,
        "metadataWebsite": "https://avs.example",
        "metadataSocial": "https://x.com/avs",
        "metadataCode": None,
        "metadataTokenAddress": None,
        "tags": ["oracle", "restaking"],
    }


def test_lat_detail_native_tvl_uses_unit_price(api, dataset):
    # 100 NAT at 1 unit each, one unit = 0.01 ETH.
    body = api.get(f"/lat/{A(0x1002)}?withTvl=true").json()
    assert body["tvl"]["tvl"] == 1.0
    assert body["tvl"]["tvlAssets"] == {"NAT": 100.0}
    assert body["tvl"]["tvlAssetsEth"] == {"NAT": 1.0}


def test_lat_detail_unknown_is_404(api, dataset):
    response = api.get(f"/lat/{A(0xDEAD)}")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


def test_lat_tokens(api, dataset):
    response = api.get(f"/lat/{A(0x1001)}/tokens")
    assert response.status_code == 200
    tokens = eth_lat_json()["tokens"]
    assert response.json() == {"data": [tokens[0] | {"refId": 8085}, tokens[1] | {"refId": 0}]}


def test_supported_tokens(api, dataset):
    response = api.get("/lat/assets")
    assert response.status_code == 200
    assert response.json() == {
        "data": [
            {
                "tokenAddress": A(0x5E),
                "tokenSymbol": "stETH",
                "tokenName": "Staked Ether",
                "tokenDecimals": 18,
                "tokenRefId": 8085,
                "lats": [
                    {"latAddress": A(0x1001), "latName": "Example ETH LAT", "latSymbol": "eLAT"}
                ],
            },
            {
                "tokenAddress": A(0x6D),
                "tokenSymbol": "USDx",
                "tokenName": "Dollar X",
                "tokenDecimals": 6,
                "tokenRefId": 0,
                "lats": [
                    {"latAddress": A(0x1001), "latName": "Example ETH LAT", "latSymbol": "eLAT"}
                ],
            },
            {
                "tokenAddress": A(0x7A),
                "tokenSymbol": "NAT",
                "tokenName": "Native AVS Token",
                "tokenDecimals": 18,
                "tokenRefId": 0,
                "lats": [{"latAddress": A(0x1002), "latName": "Native LAT", "latSymbol": "nLAT"}],
            },
        ]
    }


def test_exchange_rates_of_lat(api, dataset):
    # One eLAT = 20/16 = 1.25 ETH = 1.25 stETH = 2500 USDx (0.0005 ETH each).
    response = api.get(f"/lat/exchange/{A(0x1001)}")
    assert response.status_code == 200
    assert response.json() == {
        "address": A(0x1001),
        "exchangeRates": {"stETH": 1.25, "USDx": 2500.0},
    }


def test_exchange_rates_of_token(api, dataset):
    # One stETH = 1 ETH buys 1 / 1.25 = 0.8 eLAT.
    response = api.get(f"/lat/exchange/{A(0x5E).lower()}")
    assert response.status_code == 200
    assert response.json() == {"address": A(0x5E), "exchangeRates": {"eLAT": 0.8}}


def test_exchange_rates_unknown_is_404(api, dataset):
    assert api.get(f"/lat/exchange/{A(0xBEEF)}").status_code == 404


def test_exchange_rate_with_empty_supply_is_one_to_one(api, dataset):
    dataset.native_lat.total_supply = 0
    dataset.native_lat.total_assets = 0
    dataset.native_lat.save()
    assert api.get(f"/lat/exchange/{A(0x1002)}").json()["exchangeRates"] == {"NAT": 1.0}


def test_fees(api, dataset):
    # Operator One set 500 bips (5%); Operator Two set none (10%): mean 7.5.
    response = api.get(f"/lat/{A(0x1001)}/fees")
    assert response.status_code == 200
    assert response.json() == {
        "data": {"managementFee": 2.5, "performanceFee": 10.0, "avgOperatorPerformanceFee": 7.5}
    }


def test_fees_without_structure_or_operators(api, dataset):
    response = api.get(f"/lat/{A(0x1002)}/fees")
    assert response.json() == {
        "data": {"managementFee": 0.0, "performanceFee": 0.0, "avgOperatorPerformanceFee": 0.0}
    }


def test_avs_lats(api, dataset):
    f.LatFactory(proxy_address=A(0x1009), symbol="eLAT2", avs=dataset.avs)
    response = api.get(f"/lat/avs/{A(0xA1)}")
    assert response.status_code == 200
    assert response.json() == {
        "data": [
            {"address": A(0x1001), "symbol": "eLAT"},
            {"address": A(0x1009), "symbol": "eLAT2"},
        ]
    }


def test_avs_unknown_is_404(api, dataset):
    assert api.get(f"/lat/avs/{A(0xA9)}").status_code == 404


def test_base_asset_constant_is_checksummed():
    from eth_utils import to_checksum_address

    assert to_checksum_address(BEACON_CHAIN_ETH) == BEACON_CHAIN_ETH
