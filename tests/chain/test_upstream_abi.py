"""The devnet's LAT contracts against upstream's interfaces (Mainnet v1), so that the two cannot
drift: every function, event and error upstream's `src/interfaces/*.sol` declares is in the
devnet's compiled ABI with the same signature (argument and return types, mutability, indexed
event arguments), and whatever else the devnet's ABI has is listed below with the reason.

Upstream's signatures are data (tests/data/upstream_interface_abi.json, commit noted there),
written by `python -m devchain.upstream_abi` from a clone of the upstream repository.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chain.abi import ABI_DIR
from devchain.upstream_abi import COMMIT, signatures

UPSTREAM = json.loads(
    (Path(__file__).resolve().parents[1] / "data" / "upstream_interface_abi.json").read_text()
)

# OpenZeppelin 4.9's, inherited by the upstream implementations as by the devnet's.
ACCESS_CONTROL = {
    "functions": {
        "DEFAULT_ADMIN_ROLE() view returns (bytes32)",
        "getRoleAdmin(bytes32) view returns (bytes32)",
        "grantRole(bytes32,address) nonpayable returns ()",
        "hasRole(bytes32,address) view returns (bool)",
        "renounceRole(bytes32,address) nonpayable returns ()",
        "revokeRole(bytes32,address) nonpayable returns ()",
        "supportsInterface(bytes4) view returns (bool)",
    },
    "events": {
        "RoleAdminChanged(bytes32 indexed,bytes32 indexed,bytes32 indexed)",
        "RoleGranted(bytes32 indexed,address indexed,address indexed)",
        "RoleRevoked(bytes32 indexed,address indexed,address indexed)",
    },
}
INITIALIZABLE = {"events": {"Initialized(uint8)"}}
ERC20_PAUSABLE = {
    "functions": {
        "allowance(address,address) view returns (uint256)",
        "approve(address,uint256) nonpayable returns (bool)",
        "balanceOf(address) view returns (uint256)",
        "decimals() view returns (uint8)",
        "decreaseAllowance(address,uint256) nonpayable returns (bool)",
        "increaseAllowance(address,uint256) nonpayable returns (bool)",
        "name() view returns (string)",
        "symbol() view returns (string)",
        "totalSupply() view returns (uint256)",
        "transfer(address,uint256) nonpayable returns (bool)",
        "transferFrom(address,address,uint256) nonpayable returns (bool)",
        "paused() view returns (bool)",
    },
    "events": {
        "Approval(address indexed,address indexed,uint256)",
        "Transfer(address indexed,address indexed,uint256)",
        "Paused(address)",
        "Unpaused(address)",
    },
}
# Public state and constants of upstream's implementations (src/core, src/utils) beyond their
# interfaces: the devnet has them too, as a real deployment's ABI does.
IMPLEMENTATION = {
    "LiquidToken": {
        "functions": {
            "PAUSER_ROLE() view returns (bytes32)",
            "liquidTokenManager() view returns (address)",
            "tokenRegistryOracle() view returns (address)",
            "assetBalances(address) view returns (uint256)",
            "queuedAssetBalances(address) view returns (uint256)",
        }
    },
    "LiquidTokenManager": {
        "functions": {
            "PRICE_DECIMALS() view returns (uint256)",
            "PRICE_UPDATER_ROLE() view returns (bytes32)",
            "STRATEGY_CONTROLLER_ROLE() view returns (bytes32)",
            "strategyTokens(address) view returns (address)",
            "supportedTokens(uint256) view returns (address)",
            "tokenStrategies(address) view returns (address)",
            "tokens(address) view returns (uint256,uint256,uint256)",
        }
    },
    "StakerNode": {
        "functions": {
            "LIQUID_TOKEN_MANAGER_ROLE() view returns (bytes32)",
            "STAKER_NODES_DELEGATOR_ROLE() view returns (bytes32)",
            "coordinator() view returns (address)",
            "id() view returns (uint256)",
            "operatorDelegation() view returns (address)",
        }
    },
    "StakerNodeCoordinator": {
        "functions": {
            "STAKER_NODES_DELEGATOR_ROLE() view returns (bytes32)",
            "STAKER_NODE_CREATOR_ROLE() view returns (bytes32)",
            "upgradeableBeacon() view returns (address)",
        }
    },
    "TokenRegistryOracle": {
        "functions": {
            "ORACLE_ADMIN_ROLE() view returns (bytes32)",
            "RATE_UPDATER_ROLE() view returns (bytes32)",
            "TOKEN_CONFIGURATOR_ROLE() view returns (bytes32)",
            "SOURCE_TYPE_CHAINLINK() view returns (uint8)",
            "SOURCE_TYPE_CURVE() view returns (uint8)",
            "SOURCE_TYPE_PROTOCOL() view returns (uint8)",
            "configuredTokens(uint256) view returns (address)",
            "isConfigured(address) view returns (bool)",
            "lastGlobalPriceUpdate() view returns (uint64)",
            "liquidTokenManager() view returns (address)",
            "requiresReentrancyLock(address) view returns (bool)",
            "tokenConfigs(address) view returns (uint8,uint8,uint16,address,address,bytes4)",
        }
    },
}
# The devnet's own additions, which Mainnet v1 does not have (devchain/contracts explains each).
DEVNET_ONLY = {
    "LiquidToken": {
        "functions": {
            "burn(uint256) nonpayable returns ()",
            "queueAssets(address,uint256) nonpayable returns ()",
            "legacyEvents() view returns (bool)",
            "setLegacyEvents(bool) nonpayable returns ()",
        },
        # The older deployments' deposit event, which the service indexes too.
        "events": {"Deposit(address indexed,address indexed,address indexed,uint256,uint256)"},
    },
    "LiquidTokenManager": {
        "functions": {
            "queueAssets(address,uint256) nonpayable returns ()",
            "undelegateNodes(uint256[]) nonpayable returns ()",
        }
    },
    "StakerNode": {"functions": {"undelegate() nonpayable returns (address)"}},
}
INHERITED = {
    "LiquidToken": [ACCESS_CONTROL, INITIALIZABLE, ERC20_PAUSABLE],
    "LiquidTokenManager": [ACCESS_CONTROL, INITIALIZABLE],
    "StakerNode": [INITIALIZABLE],
    "StakerNodeCoordinator": [ACCESS_CONTROL, INITIALIZABLE],
    "TokenRegistryOracle": [ACCESS_CONTROL, INITIALIZABLE],
}
KINDS = ("functions", "events", "errors")


def devnet(contract: str) -> dict[str, set[str]]:
    abi = json.loads((ABI_DIR / f"{contract}.json").read_text())
    return {kind: set(found) for kind, found in signatures(abi).items()}


def test_the_data_is_the_mainnet_v1_commit():
    assert UPSTREAM["commit"] == COMMIT
    assert UPSTREAM["commit"].startswith("947e426")
    assert set(UPSTREAM["contracts"]) == set(INHERITED)


@pytest.mark.parametrize("contract", sorted(INHERITED))
def test_the_devnet_has_every_upstream_signature(contract):
    upstream, ours = UPSTREAM["contracts"][contract], devnet(contract)
    for kind in KINDS:
        assert set(upstream[kind]) - ours[kind] == set(), f"{contract} {kind} missing"


@pytest.mark.parametrize("contract", sorted(INHERITED))
def test_whatever_else_the_devnet_has_is_accounted_for(contract):
    upstream, ours = UPSTREAM["contracts"][contract], devnet(contract)
    for kind in KINDS:
        allowed: set[str] = set()
        for part in [*INHERITED[contract], IMPLEMENTATION.get(contract, {})]:
            allowed |= part.get(kind, set())
        allowed |= DEVNET_ONLY.get(contract, {}).get(kind, set())
        assert ours[kind] - set(upstream[kind]) == allowed, f"{contract} {kind}"


def test_chain_md_events_have_upstreams_topics():
    """The events chain.md lists with their exact signatures, as upstream declares them."""
    expected = {
        "LiquidToken": {
            "PricesUpdatedBeforeDeposit(address indexed)",
            "AssetTransferred(address indexed,uint256,address indexed,address indexed)",
            "AssetDeposited(address indexed,address indexed,address indexed,uint256,uint256)",
        },
        "LiquidTokenManager": {
            "AssetsDepositedToEigenlayer(address[],uint256[],address[],address indexed)",
            "VolatilityThresholdUpdated(address indexed,uint256,uint256,address indexed)",
            "TokenPriceUpdated(address indexed,uint256,uint256,address indexed)",
        },
        "StakerNodeCoordinator": {
            "MaxNodesUpdated(uint256,uint256,address indexed)",
            "NodeImplementationChanged(address indexed,address indexed,bool)",
        },
        "StakerNode": {"AssetDepositedToStrategy(address indexed,address indexed,uint256,uint256)"},
        "TokenRegistryOracle": {
            "TokenRateUpdated(address indexed,uint256,uint256,address indexed)",
            "GlobalPricesUpdated(address indexed,uint256)",
        },
    }
    for contract, events in expected.items():
        assert events <= set(UPSTREAM["contracts"][contract]["events"])
        assert events <= devnet(contract)["events"]
