"""The events of a LAT's contracts (the LAT, its manager, coordinator and price oracle, each
staker node, the proxies and the node beacon), read in one `eth_getLogs` and decoded into
`ActivityLog`s: a feed type, the position of the log and its arguments ready for JSON.

The table is extensions.md's: each (contract, event) has a feed type. `Transfer` has three:
`transfer` between holders, `mint` from the zero address and `burn` to it (mints and burns
move balances but are not in the feed). Deposits and transfers are decoded by hand, as the
deposit logs are (a backfill decodes hundreds of thousands; their layouts are fixed); the rare
others go through eth_abi with the argument names of the ABI.
"""

from __future__ import annotations

from datetime import UTC, datetime
from functools import lru_cache
from typing import Any, NamedTuple

from chain.abi import Event, event
from core.addresses import checksum

ZERO_TOPIC_ADDRESS = "0x" + "0" * 40
# The contract of `Upgraded` in the table: any of the LAT's transparent proxies or the node
# beacon (OpenZeppelin 4.9's event, the same topic for both).
PROXIES = "TransparentUpgradeableProxy"

# (contract, event, feed type); the contract names the address the log must come from (a
# StakerNode event: any of the LAT's nodes; `Upgraded`: any of its proxies or the node beacon).
ACTIVITY_EVENTS: tuple[tuple[str, str, str], ...] = (
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
    ("LiquidToken", "PricesUpdatedBeforeDeposit", "pricesRefreshed"),
    ("LiquidToken", "AssetTransferred", "assetsTransferred"),
    ("LiquidTokenManager", "AssetsDepositedToEigenlayer", "assetsDepositedToEigenlayer"),
    ("LiquidTokenManager", "VolatilityThresholdUpdated", "volatilityThresholdUpdated"),
    ("StakerNodeCoordinator", "MaxNodesUpdated", "maxNodesUpdated"),
    ("StakerNodeCoordinator", "NodeImplementationChanged", "nodeImplementationChanged"),
    ("StakerNode", "UndelegatedFromOperator", "nodeUndelegated"),
    ("StakerNode", "AssetDepositedToStrategy", "nodeAssetDeposited"),
    ("TokenRegistryOracle", "TokenRateUpdated", "tokenRateUpdated"),
    ("TokenRegistryOracle", "GlobalPricesUpdated", "globalPricesUpdated"),
    (PROXIES, "Upgraded", "upgraded"),
)
# The arguments of each feed type, in the order of extensions.md's table (a staker node's
# events lead with the node's address and id; `upgraded` with the contract upgraded).
FEED_ARGS: dict[str, tuple[str, ...]] = {
    "deposit": ("sender", "receiver", "asset", "amount", "shares"),
    "transfer": ("from", "to", "value"),
    "paused": ("account",),
    "unpaused": ("account",),
    "tokenAdded": (
        "token",
        "decimals",
        "initialPrice",
        "volatilityThreshold",
        "strategy",
        "setter",
    ),
    "tokenRemoved": ("token", "remover"),
    "priceUpdated": ("token", "oldPrice", "newPrice", "updater"),
    "nodeDelegated": ("nodeId", "operator"),
    "assetsStaked": ("nodeId", "assets", "amounts", "staker"),
    "nodeCreated": ("nodeId", "node", "creator"),
    "pricesRefreshed": ("depositor",),
    "assetsTransferred": ("asset", "amount", "destination", "initiator"),
    "assetsDepositedToEigenlayer": ("assets", "amounts", "strategies", "depositor"),
    "volatilityThresholdUpdated": ("asset", "oldThreshold", "newThreshold", "updatedBy"),
    "maxNodesUpdated": ("oldMaxNodes", "newMaxNodes", "updater"),
    "nodeImplementationChanged": ("beacon", "implementation", "isInitialRegistration"),
    "nodeUndelegated": ("node", "nodeId", "operator"),
    "nodeAssetDeposited": ("node", "nodeId", "asset", "strategy", "amount", "shares"),
    "tokenRateUpdated": ("token", "oldRate", "newRate", "updater"),
    "globalPricesUpdated": ("updater", "timestamp"),
    "upgraded": ("contract", "implementation"),
}
# The feed's names of arguments the ABI names otherwise.
_RENAMED = {
    "upgradeableBeaconAddress": "beacon",
    "implementationContract": "implementation",
}
# `upgraded`'s `contract`: the name of each upgradeable contract of a LAT (the proxies by their
# manifest names; the node beacon upgrades every staker node at once).
UPGRADEABLE = {
    "LiquidToken": "liquidToken",
    "LiquidTokenManager": "liquidTokenManager",
    "StakerNodeCoordinator": "stakerNodeCoordinator",
    "TokenRegistryOracle": "tokenRegistryOracle",
    "UpgradeableBeacon": "stakerNode",
}
# Arguments given as JSON numbers; every other uint256 is a decimal string.
NUMBER_ARGS = frozenset({"nodeId", "decimals"})


class ActivityLog(NamedTuple):
    """One decoded log (a tuple: a backfill makes hundreds of thousands)."""

    type: str  # a feed type of ACTIVITY_EVENTS, or "mint" / "burn"
    event: str  # the event's name in the ABI
    tx_hash: str
    log_index: int
    block_number: int
    block_hash: str
    args: dict[str, Any]  # JSON-ready: checksummed addresses, decimal strings, lists
    block_timestamp: int | None = None  # where the node includes it in logs

    @property
    def key(self) -> tuple[int, int]:
        return (self.block_number, self.log_index)


def activity_topics() -> list[str]:
    """The first topics of every event of the table (one filter for all the contracts)."""
    return sorted({event(contract, name).topic for contract, name, _ in ACTIVITY_EVENTS})


def activity_decoder(
    addresses: dict[str, str], *, nodes: dict[str, int] | None = None, beacon: str = ""
):
    """A decoder of raw logs for the contracts {contract name: address} (the LAT's proxies;
    `TokenRegistryOracle` may be missing or empty), the staker `nodes` {address: node id} and
    the node `beacon`: an ActivityLog for a log of the table emitted by the right contract,
    None for any other log."""
    sources: dict[str, list[tuple[str, dict[str, Any]]]] = {
        contract: [(address, {})] for contract, address in addresses.items() if address
    }
    sources["StakerNode"] = [
        (address, {"node": checksum(address), "nodeId": node_id})
        for address, node_id in (nodes or {}).items()
    ]
    upgradeable = {**addresses, "UpgradeableBeacon": beacon}
    sources[PROXIES] = [
        (address, {"contract": UPGRADEABLE[contract]})
        for contract, address in upgradeable.items()
        if address and contract in UPGRADEABLE
    ]
    table: dict[tuple[str, str], tuple[Event, str, dict[str, Any]]] = {}
    for contract, name, kind in ACTIVITY_EVENTS:
        ev = event(contract, name)
        for address, extra in sources.get(contract, []):
            table[(address.lower(), ev.topic)] = (ev, kind, extra)

    def decode(log: dict[str, Any]) -> ActivityLog | None:
        topics = log["topics"]
        found = table.get((log["address"].lower(), topics[0] if topics else ""))
        if found is None:
            return None
        ev, kind, extra = found
        args = _fixed_args(ev.name, topics, log["data"]) or _abi_args(ev, topics, log["data"])
        if extra:
            args = {**extra, **args}
        if ev.name == "Transfer":
            kind = _transfer_kind(args)
        return ActivityLog(
            type=kind,
            event=ev.name,
            tx_hash=log["transactionHash"],
            log_index=int(log["logIndex"], 16),
            block_number=int(log["blockNumber"], 16),
            block_hash=log["blockHash"],
            args=args,
            block_timestamp=int(log["blockTimestamp"], 16) if log.get("blockTimestamp") else None,
        )

    return decode


def _transfer_kind(args: dict[str, Any]) -> str:
    if args["from"] == ZERO_TOPIC_ADDRESS:  # checksummed: the zero address has no letters
        return "mint"
    if args["to"] == ZERO_TOPIC_ADDRESS:
        return "burn"
    return "transfer"


@lru_cache(maxsize=1 << 16)
def _topic_address(topic: str) -> str:
    """The checksummed address of an indexed address topic (the same holders recur)."""
    return checksum("0x" + topic[-40:])


def _words(data: str, count: int) -> list[str]:
    """The first `count` 32-byte words of 0x-hex log data, as decimal strings."""
    if len(data) < 2 + 64 * count:
        raise ValueError("log data shorter than its layout")
    return [str(int(data[2 + 64 * i : 66 + 64 * i], 16)) for i in range(count)]


def _fixed_args(name: str, topics: list[str], data: str) -> dict[str, Any] | None:
    """Deposits and transfers, by hand; None for any other event."""
    if name in ("AssetDeposited", "Deposit"):
        amount, shares = _words(data, 2)
        sender, receiver, asset = (_topic_address(t) for t in topics[1:4])
        return {
            "sender": sender,
            "receiver": receiver,
            "asset": asset,
            "amount": amount,
            "shares": shares,
        }
    if name == "Transfer":
        (value,) = _words(data, 1)
        return {"from": _topic_address(topics[1]), "to": _topic_address(topics[2]), "value": value}
    return None


def _abi_args(ev: Event, topics: list[str], data: str) -> dict[str, Any]:
    values = ev.decode(topics[1:], data)
    kinds = ev.indexed + ev.data
    return {
        _RENAMED.get(name, name): _json_value(ev.name, name, kind, value)
        for name, kind, value in zip(ev.names, kinds, values, strict=True)
    }


def _json_value(event_name: str, name: str, kind: str, value: Any) -> Any:
    if kind.endswith("[]"):
        return [_json_value(event_name, name, kind[:-2], v) for v in value]
    if event_name == "GlobalPricesUpdated" and name == "timestamp":
        text = datetime.fromtimestamp(int(value), UTC).isoformat()
        return text[:-6] + "Z" if text.endswith("+00:00") else text
    if kind == "address":
        return checksum(value)
    if kind.startswith(("uint", "int")):
        return int(value) if name in NUMBER_ARGS else str(int(value))
    if kind == "bool":
        return bool(value)
    if isinstance(value, bytes):
        return "0x" + value.hex()
    return value
