"""Endpoints 5-8 against the hand-written data set of tests/conftest.py."""

from __future__ import annotations

import pytest

from tests import factories as f

pytestmark = pytest.mark.django_db

A = f.address
ZERO = "0x0000000000000000000000000000000000000000"


def test_operator_list(api, dataset):
    # An operator no node delegates to any more is not listed.
    f.OperatorFactory(address=A(0x903))
    response = api.get("/lat/operators")
    assert response.status_code == 200
    assert response.json() == {"data": [A(0x901), A(0x902)]}


def test_operator_detail(api, dataset):
    response = api.get(f"/lat/operators/{A(0x901).lower()}")
    assert response.status_code == 200
    # Node 0 stakes 5 stETH (1 ETH each) and 2000 USDx (0.0005 ETH each): 6 ETH.
    assert response.json() == {
        "data": {
            "operatorAddress": A(0x901),
            "metadata": {
                "metadataName": "Operator One",
                "metadataDescription": "",
                "metadataCommunityChat": "",
                "metadataLogo": "",
                "metadataMessaging": "",
                "metadataWebsite": "https://one.example",
                "metadataSocial": "",
                "totalStakers": 1,
                "tvl": 6.0,
            },
            "liquidTokens": [A(0x1001)],
            "stakerNodeAssets": [
                {
                    "nodeAddress": A(0x3100),
                    "nodeId": 0,
                    "assets": [
                        {
                            "asset": A(0x5E),
                            "strategy": A(0x5001),
                            "stakedAmount": "5000000000000000000",
                            "coreShares": "4000000000000000000",
                        },
                        {
                            "asset": A(0x6D),
                            "strategy": A(0x5002),
                            "stakedAmount": "2000000000",
                            "coreShares": "1900000000",
                        },
                    ],
                }
            ],
        }
    }


def test_operator_detail_with_tvl(api, dataset):
    body = api.get(f"/lat/operators/{A(0x901)}?withTvl=true").json()["data"]
    assert body["tvl"] == {
        "tvl": 6.0,
        "tvlStrategies": {"stETH": 5.0, "USDx": 2000.0},
        "tvlStrategiesEth": {"stETH": 5.0, "USDx": 1.0},
    }


def test_operator_unknown_is_404(api, dataset):
    response = api.get(f"/lat/operators/{A(0x999)}")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


def test_lat_operators(api, dataset):
    response = api.get(f"/lat/{A(0x1001)}/operators?withTvl=true")
    assert response.status_code == 200
    assert response.json() == {
        "data": [
            {
                "operator": A(0x901),
                "allocations": [
                    {
                        "asset": A(0x5E),
                        "strategy": A(0x5001),
                        "stakedAmount": "5000000000000000000",
                        "coreShares": "4000000000000000000",
                    },
                    {
                        "asset": A(0x6D),
                        "strategy": A(0x5002),
                        "stakedAmount": "2000000000",
                        "coreShares": "1900000000",
                    },
                ],
                "tvl": {
                    "tvl": 6.0,
                    "tvlStrategies": {"stETH": 5.0, "USDx": 2000.0},
                    "tvlStrategiesEth": {"stETH": 5.0, "USDx": 1.0},
                },
            },
            {
                "operator": A(0x902),
                "allocations": [
                    {
                        "asset": A(0x5E),
                        "strategy": A(0x5001),
                        "stakedAmount": "3000000000000000000",
                        "coreShares": "3000000000000000000",
                    },
                ],
                "tvl": {
                    "tvl": 3.0,
                    "tvlStrategies": {"stETH": 3.0},
                    "tvlStrategiesEth": {"stETH": 3.0},
                },
            },
        ]
    }


def test_lat_operators_sums_nodes_of_one_operator(api, dataset):
    node = f.StakerNodeFactory(lat=dataset.eth_lat, node_id=7, operator=dataset.op2)
    f.NodeAssetFactory(
        node=node,
        token=dataset.steth,
        strategy_address=A(0x5001),
        staked_amount=2 * 10**18,
        core_shares=10**18,
    )
    data = api.get(f"/lat/{A(0x1001)}/operators").json()["data"]
    assert "tvl" not in data[1]
    assert data[1]["allocations"] == [
        {
            "asset": A(0x5E),
            "strategy": A(0x5001),
            "stakedAmount": "5000000000000000000",
            "coreShares": "4000000000000000000",
        }
    ]


def test_lat_operators_sums_amounts_beyond_28_digits_exactly(api, dataset):
    # A token of a large supply: 10**33 units is 34 digits, which a Decimal sum would round.
    for node_id, amount in ((7, 10**33 + 1), (8, 2)):
        node = f.StakerNodeFactory(lat=dataset.eth_lat, node_id=node_id, operator=dataset.op2)
        f.NodeAssetFactory(
            node=node,
            token=dataset.usdx,
            strategy_address=A(0x5002),
            staked_amount=amount,
            core_shares=amount + 1,
        )
    data = api.get(f"/lat/{A(0x1001)}/operators").json()["data"]
    (usdx,) = [a for a in data[1]["allocations"] if a["strategy"] == A(0x5002)]
    assert (usdx["stakedAmount"], usdx["coreShares"]) == (str(10**33 + 3), str(10**33 + 5))


def test_staker_nodes(api, dataset):
    response = api.get(f"/lat/{A(0x1001)}/staker-nodes")
    assert response.status_code == 200
    common = {
        "liquidTokenAddress": A(0x1001),
        "createdAtBlock": 10,
        "createdAt": "2026-01-01T00:00:00Z",
        "updatedAtBlock": 20,
        "updatedAt": "2026-01-02T00:00:00Z",
    }
    assert response.json() == {
        "address": A(0x1001),
        "maxNodes": 5,
        "stakerNodes": [
            {
                "address": A(0x3100),
                "nodeId": 0,
                "operatorDelegation": A(0x901),
                **common,
                "assets": [
                    {
                        "nodeAddress": A(0x3100),
                        "asset": A(0x5E),
                        "strategy": A(0x5001),
                        "stakedAmount": "5000000000000000000",
                        "coreShares": "4000000000000000000",
                    },
                    {
                        "nodeAddress": A(0x3100),
                        "asset": A(0x6D),
                        "strategy": A(0x5002),
                        "stakedAmount": "2000000000",
                        "coreShares": "1900000000",
                    },
                ],
            },
            {
                "address": A(0x3101),
                "nodeId": 1,
                "operatorDelegation": A(0x902),
                **common,
                "assets": [
                    {
                        "nodeAddress": A(0x3101),
                        "asset": A(0x5E),
                        "strategy": A(0x5001),
                        "stakedAmount": "3000000000000000000",
                        "coreShares": "3000000000000000000",
                    },
                ],
            },
            {"address": A(0x3102), "nodeId": 2, "operatorDelegation": ZERO, **common, "assets": []},
        ],
    }


def test_staker_nodes_unknown_lat_is_404(api, dataset):
    assert api.get(f"/lat/{A(0x1009)}/staker-nodes").status_code == 404
