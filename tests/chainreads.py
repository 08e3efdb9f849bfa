"""Facts of the devnet read with plain web3 (`get_logs`, `get_block`), never from the service's
tables: what the tests expect the service to have stored or to serve."""

from __future__ import annotations

from typing import Any

from web3 import Web3


def hexstr(value: Any) -> str:
    return Web3.to_hex(value)


def chain_submissions(chain) -> set[tuple[str, int, int, str, int]]:
    """(tx hash, log index, block, block hash, amount) of every AVS's submissions."""
    out = set()
    for manifest in chain.manifests:
        rc = chain.contract("RewardsCoordinator", manifest["eigenlayer"]["rewardsCoordinator"])
        for log in rc.events.AVSRewardsSubmissionCreated.get_logs(
            from_block=manifest["deploymentBlock"],
            argument_filters={"avs": manifest["avsAddress"]},
        ):
            submission = log["args"]["rewardsSubmission"]
            amount = submission["amount"] if hasattr(submission, "keys") else submission[2]
            out.add(
                (
                    hexstr(log["transactionHash"]),
                    log["logIndex"],
                    log["blockNumber"],
                    hexstr(log["blockHash"]),
                    amount,
                )
            )
    return out


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


def chain_deposits(chain) -> list[dict[str, Any]]:
    """Every deposit event of every LAT, read with web3, newest first."""
    out = []
    for manifest in chain.manifests:
        lt = chain.contract("LiquidToken", manifest["proxyAddress"])
        for event in (lt.events.AssetDeposited, lt.events.Deposit):
            for log in event.get_logs(from_block=manifest["deploymentBlock"]):
                out.append(
                    {
                        "sender": log["args"]["sender"],
                        "receiver": log["args"]["receiver"],
                        "asset": log["args"]["asset"],
                        "liquidTokenAddress": manifest["proxyAddress"],
                        "amount": str(log["args"]["amount"]),
                        "shares": str(log["args"]["shares"]),
                        "createdAtBlock": log["blockNumber"],
                        "transactionHash": "0x" + log["transactionHash"].hex().removeprefix("0x"),
                        "logIndex": log["logIndex"],
                    }
                )
    out.sort(key=lambda d: (d["createdAtBlock"], d["logIndex"]), reverse=True)
    return out


def chain_deposit_count(chain, manifest) -> int:
    lt = chain.contract("LiquidToken", manifest["proxyAddress"])
    return sum(
        len(event.get_logs(from_block=manifest["deploymentBlock"]))
        for event in (lt.events.AssetDeposited, lt.events.Deposit)
    )


# extensions.md's table, written out here from the spec (not taken from the service's code):
# (contract, event, feed type) and the JSON form of each argument.
ACTIVITY_TABLE = (
    ("LiquidToken", "AssetDeposited", "deposit"),
    ("LiquidToken", "Deposit", "deposit"),
    ("LiquidToken", "Transfer", "transfer"),
    ("LiquidToken", "Paused", "paused"),
    ("LiquidToken", "Unpaused", "unpaused"),
    ("LiquidTokenManager", "TokenAdded", "tokenAdded"),
    ("LiquidTokenManager", "TokenRemoved", "tokenRemoved"),
    ("LiquidTokenManager", "TokenPriceUpdated", "priceUpdated"),
    ("LiquidTokenManager", "NodeDelegated", "nodeDelegated"),
    ("LiquidTokenManager", "AssetsStakedToNode", "assetsStaked"),
    ("StakerNodeCoordinator", "NodeCreated", "nodeCreated"),
)
ZERO = "0x" + "0" * 40


def _json_arg(name: str, value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return [_json_arg(name, v) for v in value]
    if isinstance(value, str) and Web3.is_address(value):
        return Web3.to_checksum_address(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return value if name in ("nodeId", "decimals") else str(value)
    return value


def chain_events(chain, manifest: dict[str, Any], to_block: int) -> list[dict[str, Any]]:
    """The LAT's feed as the chain has it, newest first: every log of the table from the
    deployment block to `to_block`, decoded by web3 (a Transfer is a `transfer` only between
    two non-zero addresses)."""
    proxies = manifest["contractDeployments"]["proxy"]
    addresses = {
        "LiquidToken": manifest["proxyAddress"],
        "LiquidTokenManager": proxies["liquidTokenManager"]["address"],
        "StakerNodeCoordinator": proxies["stakerNodeCoordinator"]["address"],
    }
    out = []
    for contract_name, event_name, kind in ACTIVITY_TABLE:
        contract = chain.contract(contract_name, addresses[contract_name])
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
                    "args": {name: _json_arg(name, value) for name, value in args.items()},
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
