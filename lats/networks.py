"""The public networks the service knows: EigenLayer's core contracts on each, as presets.

A manifest's `eigenlayer` member, or staff in admin, overrides a preset (`Lat.core_contract`);
where neither names the DelegationManager or StrategyManager, the state refresh reads them from
the LiquidTokenManager (`delegationManager()`, `strategyManager()`). A chain without a preset
(a devnet, a network EigenLayer does not publish) relies on the manifest or admin alone.

Source: the "Current Deployment Contracts" tables of the README of Layr-Labs/eigenlayer-contracts
(the proxy address of each contract), at commit f84a5151080cdf0b77b9b6e46506cde723d06c28
(2026-05-01) for Ethereum mainnet, Sepolia and Hoodi, and at commit
ec8eac29d1738ef7430366a8058c52e390f66601 (2025-11-03, the last before "chore: remove holesky
(#1662)") for Holesky, which EigenLayer has since retired. Addresses are written here in EIP-55
form (the README spells two of them in lower case).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

# The EigenLayer core contracts a LAT's refresh may use, by their manifest (`eigenlayer`) names.
EIGENLAYER_CONTRACTS: Final = (
    "delegationManager",
    "strategyManager",
    "rewardsCoordinator",
    "avsDirectory",
    "allocationManager",
)
# The two the LiquidTokenManager names itself (`delegationManager()`, `strategyManager()`).
READ_FROM_MANAGER: Final = ("delegationManager", "strategyManager")
# What goes unknown without each one the service reads (said on the LAT's sync status and in
# /health); the StrategyManager is known but nothing is read from it yet.
NEEDED_FOR: Final = {
    "delegationManager": "the staker nodes' shares",
    "rewardsCoordinator": "APY from AVS rewards and operator splits",
    "avsDirectory": "AVS metadata and the operators registered to the AVS (the rewards APY)",
    "allocationManager": "AVS metadata of operator-set AVSs",
}


@dataclass(frozen=True)
class Network:
    chain_id: int
    name: str
    eigenlayer: dict[str, str]


NETWORKS: Final = {
    network.chain_id: network
    for network in (
        Network(
            chain_id=1,
            name="Ethereum mainnet",
            eigenlayer={
                "delegationManager": "0x39053D51B77DC0d36036Fc1fCc8Cb819df8Ef37A",
                "strategyManager": "0x858646372CC42E1A627fcE94aa7A7033e7CF075A",
                "rewardsCoordinator": "0x7750d328b314EfFa365A0402CcfD489B80B0adda",
                "avsDirectory": "0x135DDa560e946695d6f155dACaFC6f1F25C1F5AF",
                "allocationManager": "0x948a420b8CC1d6BFd0B6087C2E7c344a2CD0bc39",
            },
        ),
        Network(
            chain_id=11155111,
            name="Sepolia",
            eigenlayer={
                "delegationManager": "0xD4A7E1Bd8015057293f0D0A557088c286942e84b",
                "strategyManager": "0x2E3D6c0744b10eb0A4e6F679F71554a39Ec47a5D",
                "rewardsCoordinator": "0x5ae8152fb88c26ff9ca5C014c94fca3c68029349",
                "avsDirectory": "0xa789c91ECDdae96865913130B786140Ee17aF545",
                "allocationManager": "0x42583067658071247ec8CE0A516A58f682002d07",
            },
        ),
        Network(
            chain_id=560048,
            name="Hoodi",
            eigenlayer={
                "delegationManager": "0x867837a9722C512e0862d8c2E15b8bE220E8b87d",
                "strategyManager": "0xeE45e76ddbEDdA2918b8C7E3035cd37Eab3b5D41",
                "rewardsCoordinator": "0x29e8572678e0c272350aa0b4B8f304E47EBcd5e7",
                "avsDirectory": "0xD58f6844f79eB1fbd9f7091d05f7cb30d3363926",
                "allocationManager": "0x95a7431400F362F3647a69535C5666cA0133CAA0",
            },
        ),
        Network(
            chain_id=17000,
            name="Holesky",
            eigenlayer={
                "delegationManager": "0xA44151489861Fe9e3055d95adC98FbD462B948e7",
                "strategyManager": "0xdfB5f6CE42aAA7830E94ECFCcAd411beF4d4D5b6",
                "rewardsCoordinator": "0xAcc1fb458a1317E886dB376Fc8141540537E68fE",
                "avsDirectory": "0x055733000064333CaDDbC92763c58BF0192fFeBf",
                "allocationManager": "0x78469728304326CBc65f8f95FA756B0B73164462",
            },
        ),
    )
}


def eigenlayer_preset(chain_id: int) -> dict[str, str]:
    """The EigenLayer core contracts of a public network by manifest name; {} for other chains."""
    network = NETWORKS.get(chain_id)
    return dict(network.eigenlayer) if network else {}


# ETH's USD price, for `/yields`' tvlUsd: Chainlink's ETH / USD feed (AggregatorV3Interface) on
# Ethereum mainnet, as Chainlink's data-feed directory lists it. Any chain's can be set with
# ETH_USD_FEED_<chainId> (latsite/settings.py), which wins over this one.
ETH_USD_FEEDS: Final = {1: "0x5f4eC3Df9cbd43714FE2740f5E3616155c5b8419"}

# DefiLlama's names of the chains (the `name` of api.llama.fi/chains, which its yield server's
# pools carry as `chain`); YIELDS_CHAIN_NAME_<chainId> names another. A chain named nowhere is
# "Chain <id>".
DEFILLAMA_CHAINS: Final = {
    1: "Ethereum",
    10: "OP Mainnet",
    56: "BSC",
    100: "Gnosis",
    137: "Polygon",
    8453: "Base",
    17000: "Holesky",
    42161: "Arbitrum",
    43114: "Avalanche",
    560048: "Hoodi",
    11155111: "Sepolia",
}
