"""Hand-computed JSON of the data set of tests/conftest.py (`dataset`), as the API serves it."""

from __future__ import annotations

from tests import factories as f

A = f.address


def eth_lat_json():
    return {
        "proxyAddress": A(0x1001),
        "implementationAddress": A(0x2001),
        "name": "Example ETH LAT",
        "symbol": "eLAT",
        "avsAddress": A(0xA1),
        "chainId": 31337,
        "maxNodes": 5,
        "contractDeployments": {
            "implementation": {"liquidTokenManager": A(0x3001)},
            "proxy": {"liquidTokenManager": A(0x3002)},
        },
        "tokens": [
            {
                "address": A(0x5E),
                "strategyAddress": A(0x5001),
                "volatilityThreshold": "50000000000000000",
                "pricePerUnit": "1000000000000000000",
                "decimals": 18,
            },
            {
                "address": A(0x6D),
                "strategyAddress": A(0x5002),
                "volatilityThreshold": "0",
                "pricePerUnit": "500000000000000",
                "decimals": 6,
            },
        ],
    }


def native_lat_json():
    return {
        "proxyAddress": A(0x1002),
        "implementationAddress": A(0x2002),
        "name": "Native LAT",
        "symbol": "nLAT",
        "avsAddress": A(0xA2),
        "chainId": 31337,
        "maxNodes": 3,
        "contractDeployments": {"implementation": {}, "proxy": {}},
        "tokens": [
            {
                "address": A(0x7A),
                "strategyAddress": A(0x5003),
                "volatilityThreshold": "0",
                "pricePerUnit": "1000000000000000000",
                "decimals": 18,
            }
        ],
    }
