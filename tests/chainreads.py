"""Facts of the devnet read with plain web3 (`get_logs`, `get_block`), never from the service's
tables: what the tests expect the service to have stored or to serve."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from web3 import Web3


def hexstr(value: Any) -> str:
    return Web3.to_hex(value)


def chain_submissions(chain) -> set[tuple[str, int, int, str, int]]:
    """(tx hash, log index, block, block hash, amount) of every AVS's submissions the rewards APY
    counts: AVS submissions (their amount) and operator-directed ones (the sum of what they pay
    each operator)."""
    out = set()
    for manifest in chain.manifests:
        rc = chain.contract("RewardsCoordinator", manifest["eigenlayer"]["rewardsCoordinator"])
        kinds = (
            (rc.events.AVSRewardsSubmissionCreated, "rewardsSubmission", _avs_amount),
            (
                rc.events.OperatorDirectedAVSRewardsSubmissionCreated,
                "operatorDirectedRewardsSubmission",
                _operator_directed_amount,
            ),
        )
        for event, field, amount in kinds:
            for log in event.get_logs(
                from_block=manifest["deploymentBlock"],
                argument_filters={"avs": manifest["avsAddress"]},
            ):
                out.add(
                    (
                        hexstr(log["transactionHash"]),
                        log["logIndex"],
                        log["blockNumber"],
                        hexstr(log["blockHash"]),
                        amount(log["args"][field]),
                    )
                )
    return out


def _avs_amount(submission) -> int:
    return submission["amount"] if hasattr(submission, "keys") else submission[2]


def _operator_directed_amount(submission) -> int:
    rewards = submission["operatorRewards"] if hasattr(submission, "keys") else submission[2]
    return sum(r["amount"] if hasattr(r, "keys") else r[1] for r in rewards)


def chain_deposit_keys(chain) -> list[tuple[int, int, str, str]]:
    """(block, log index, tx hash, block hash) of every deposit, in listing order (oldest first)."""
    out = []
    for manifest in chain.manifests:
        lt = chain.contract("LiquidToken", manifest["proxyAddress"])
        for event in (lt.events.AssetDeposited, lt.events.Deposit):
            for log in event.get_logs(from_block=manifest["deploymentBlock"]):
                out.append(
                    (
                        log["blockNumber"],
                        log["logIndex"],
                        hexstr(log["transactionHash"]),
                        hexstr(log["blockHash"]),
                    )
                )
    return sorted(out)


def deposit_row(log: Any, manifest: dict[str, Any]) -> dict[str, Any]:
    """A decoded deposit event (AssetDeposited or Deposit) of `manifest`'s LAT as GET
    /metrics/deposits lists it (but its createdAt)."""
    return {
        "sender": log["args"]["sender"],
        "receiver": log["args"]["receiver"],
        "asset": log["args"]["asset"],
        "liquidTokenAddress": manifest["proxyAddress"],
        "amount": str(log["args"]["amount"]),
        "shares": str(log["args"]["shares"]),
        "createdAtBlock": log["blockNumber"],
        "transactionHash": hexstr(log["transactionHash"]),
        "logIndex": log["logIndex"],
    }


def chain_deposits(chain) -> list[dict[str, Any]]:
    """Every deposit event of every LAT, read with web3, newest first."""
    out = []
    for manifest in chain.manifests:
        lt = chain.contract("LiquidToken", manifest["proxyAddress"])
        for event in (lt.events.AssetDeposited, lt.events.Deposit):
            for log in event.get_logs(from_block=manifest["deploymentBlock"]):
                out.append(deposit_row(log, manifest))
    out.sort(key=lambda d: (d["createdAtBlock"], d["logIndex"]), reverse=True)
    return out


def chain_deposit_count(chain, manifest) -> int:
    lt = chain.contract("LiquidToken", manifest["proxyAddress"])
    return sum(
        len(event.get_logs(from_block=manifest["deploymentBlock"]))
        for event in (lt.events.AssetDeposited, lt.events.Deposit)
    )


# extensions.md's table, written out here from the spec (not taken from the service's code):
# (contract, event, feed type, the event's args as the feed shows them, built by hand from
# web3's decoded args `a`; a staker node's events get the node's address and id before them,
# `Upgraded` the name of the contract upgraded).
def _iso(timestamp: int) -> str:
    return datetime.fromtimestamp(timestamp, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _addresses(values) -> list[str]:
    return [Web3.to_checksum_address(v) for v in values]


ACTIVITY_TABLE: tuple[tuple[str, str, str, Callable[[Any], dict[str, Any]]], ...] = (
    ("LiquidToken", "AssetDeposited", "deposit", lambda a: {
        "sender": a["sender"], "receiver": a["receiver"], "asset": a["asset"],
        "amount": str(a["amount"]), "shares": str(a["shares"]),
    }),
    ("LiquidToken", "Deposit", "deposit", lambda a: {
        "sender": a["sender"], "receiver": a["receiver"], "asset": a["asset"],
        "amount": str(a["amount"]), "shares": str(a["shares"]),
    }),
    ("LiquidToken", "Transfer", "transfer", lambda a: {
        "from": a["from"], "to": a["to"], "value": str(a["value"]),
    }),
    ("LiquidToken", "Paused", "paused", lambda a: {"account": a["account"]}),
    ("LiquidToken", "Unpaused", "unpaused", lambda a: {"account": a["account"]}),
    ("LiquidTokenManager", "TokenAdded", "tokenAdded", lambda a: {
        "token": a["token"], "decimals": a["decimals"], "initialPrice": str(a["initialPrice"]),
        "volatilityThreshold": str(a["volatilityThreshold"]), "strategy": a["strategy"],
        "setter": a["setter"],
    }),
    ("LiquidTokenManager", "TokenRemoved", "tokenRemoved", lambda a: {
        "token": a["token"], "remover": a["remover"],
    }),
    ("LiquidTokenManager", "TokenPriceUpdated", "priceUpdated", lambda a: {
        "token": a["token"], "oldPrice": str(a["oldPrice"]), "newPrice": str(a["newPrice"]),
        "updater": a["updater"],
    }),
    ("LiquidTokenManager", "NodeDelegated", "nodeDelegated", lambda a: {
        "nodeId": a["nodeId"], "operator": a["operator"],
    }),
    ("LiquidTokenManager", "AssetsStakedToNode", "assetsStaked", lambda a: {
        "nodeId": a["nodeId"], "assets": _addresses(a["assets"]),
        "amounts": [str(v) for v in a["amounts"]], "staker": a["staker"],
    }),
    ("StakerNodeCoordinator", "NodeCreated", "nodeCreated", lambda a: {
        "nodeId": a["nodeId"], "node": a["node"], "creator": a["creator"],
    }),
    ("LiquidToken", "PricesUpdatedBeforeDeposit", "pricesRefreshed", lambda a: {
        "depositor": a["depositor"],
    }),
    ("LiquidToken", "AssetTransferred", "assetsTransferred", lambda a: {
        "asset": a["asset"], "amount": str(a["amount"]), "destination": a["destination"],
        "initiator": a["initiator"],
    }),
    ("LiquidTokenManager", "AssetsDepositedToEigenlayer", "assetsDepositedToEigenlayer",
     lambda a: {
        "assets": _addresses(a["assets"]), "amounts": [str(v) for v in a["amounts"]],
        "strategies": _addresses(a["strategies"]), "depositor": a["depositor"],
    }),
    ("LiquidTokenManager", "VolatilityThresholdUpdated", "volatilityThresholdUpdated",
     lambda a: {
        "asset": a["asset"], "oldThreshold": str(a["oldThreshold"]),
        "newThreshold": str(a["newThreshold"]), "updatedBy": a["updatedBy"],
    }),
    ("StakerNodeCoordinator", "MaxNodesUpdated", "maxNodesUpdated", lambda a: {
        "oldMaxNodes": str(a["oldMaxNodes"]), "newMaxNodes": str(a["newMaxNodes"]),
        "updater": a["updater"],
    }),
    ("StakerNodeCoordinator", "NodeImplementationChanged", "nodeImplementationChanged",
     lambda a: {
        "beacon": a["upgradeableBeaconAddress"], "implementation": a["implementationContract"],
        "isInitialRegistration": a["isInitialRegistration"],
    }),
    ("StakerNode", "UndelegatedFromOperator", "nodeUndelegated", lambda a: {
        "operator": a["operator"],
    }),
    ("StakerNode", "AssetDepositedToStrategy", "nodeAssetDeposited", lambda a: {
        "asset": a["asset"], "strategy": a["strategy"], "amount": str(a["amount"]),
        "shares": str(a["shares"]),
    }),
    ("TokenRegistryOracle", "TokenRateUpdated", "tokenRateUpdated", lambda a: {
        "token": a["token"], "oldRate": str(a["oldRate"]), "newRate": str(a["newRate"]),
        "updater": a["updater"],
    }),
    ("TokenRegistryOracle", "GlobalPricesUpdated", "globalPricesUpdated", lambda a: {
        "updater": a["updater"], "timestamp": _iso(a["timestamp"]),
    }),
    ("Proxy", "Upgraded", "upgraded", lambda a: {"implementation": a["implementation"]}),
)  # fmt: skip
FEED_TYPES = tuple(dict.fromkeys(kind for _, _, kind, _ in ACTIVITY_TABLE))
ZERO = "0x" + "0" * 40


def lat_emitters(chain, manifest: dict[str, Any]) -> dict[str, list[tuple[str, dict]]]:
    """The addresses of each contract of the table for the LAT, with the args its events lead
    with: the proxies from the manifest, the staker nodes and the node beacon from the
    coordinator."""
    proxies = manifest["contractDeployments"]["proxy"]
    coordinator = chain.contract(
        "StakerNodeCoordinator", proxies["stakerNodeCoordinator"]["address"]
    ).functions
    nodes = coordinator.getAllNodes().call()

    def node_id(node: str) -> int:
        return chain.contract("StakerNode", node).functions.getId().call()

    beacon = coordinator.upgradeableBeacon().call()
    names = {
        "liquidToken": manifest["proxyAddress"],
        **{name: ref["address"] for name, ref in proxies.items()},
    }
    return {
        "LiquidToken": [(manifest["proxyAddress"], {})],
        "LiquidTokenManager": [(proxies["liquidTokenManager"]["address"], {})],
        "StakerNodeCoordinator": [(proxies["stakerNodeCoordinator"]["address"], {})],
        "TokenRegistryOracle": [(proxies["tokenRegistryOracle"]["address"], {})],
        "StakerNode": [(node, {"node": node, "nodeId": node_id(node)}) for node in nodes],
        "Proxy": [(address, {"contract": name}) for name, address in names.items()]
        + [(beacon, {"contract": "stakerNode"})],
    }  # fmt: skip


def chain_events(chain, manifest: dict[str, Any], to_block: int) -> list[dict[str, Any]]:
    """The LAT's feed as the chain has it, newest first: every log of the table from the
    deployment block to `to_block`, decoded by web3 (a Transfer is a `transfer` only between
    two non-zero addresses)."""
    emitters = lat_emitters(chain, manifest)
    abis = {"Proxy": "TransparentUpgradeableProxy"}
    out = []
    for contract_name, event_name, kind, make_args in ACTIVITY_TABLE:
        for address, lead in emitters[contract_name]:
            contract = chain.contract(abis.get(contract_name, contract_name), address)
            for log in contract.events[event_name].get_logs(
                from_block=manifest["deploymentBlock"], to_block=to_block
            ):
                args = dict(log["args"])
                if event_name == "Transfer" and ZERO in (args["from"], args["to"]):
                    continue
                block = chain.w3.eth.get_block(log["blockNumber"])
                out.append(
                    {
                        "type": kind,
                        "blockNumber": log["blockNumber"],
                        "blockTimestamp": block["timestamp"],
                        "transactionHash": hexstr(log["transactionHash"]),
                        "logIndex": log["logIndex"],
                        "args": {**lead, **make_args(args)},
                    }
                )
    return sorted(out, key=lambda e: (e["blockNumber"], e["logIndex"]), reverse=True)


def chain_balances(chain, manifest: dict[str, Any], block: int) -> dict[str, int]:
    """balanceOf at `block` of every address a Transfer of the LAT ever credited."""
    lt = chain.contract("LiquidToken", manifest["proxyAddress"])
    credited = {
        log["args"]["to"]
        for log in lt.events.Transfer.get_logs(
            from_block=manifest["deploymentBlock"], to_block=block
        )
    } - {ZERO}
    return {a: lt.functions.balanceOf(a).call(block_identifier=block) for a in credited}
