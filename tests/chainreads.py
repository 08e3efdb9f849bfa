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
