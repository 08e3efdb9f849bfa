"""The events of a LAT's three contracts, read in one `eth_getLogs` and decoded into
`ActivityLog`s: a feed type, the position of the log and its arguments ready for JSON.

The table is extensions.md's: each (contract, event) has a feed type. `Transfer` has three:
`transfer` between holders, `mint` from the zero address and `burn` to it (mints and burns
move balances but are not in the feed). Deposits and transfers are decoded by hand, as the
deposit logs are (a backfill decodes hundreds of thousands; their layouts are fixed); the rare
others go through eth_abi with the argument names of the ABI.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, NamedTuple

from chain.abi import Event, event
from core.addresses import checksum

ZERO_TOPIC_ADDRESS = "0x" + "0" * 40

# (contract, event, feed type); the contract names the address the log must come from.
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
)
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
    """The first topics of every event of the table (one filter for the three contracts)."""
    return sorted({event(contract, name).topic for contract, name, _ in ACTIVITY_EVENTS})


def activity_decoder(addresses: dict[str, str]):
    """A decoder of raw logs for the contracts {contract name: address}: an ActivityLog for a
    log of the table emitted by the right contract, None for any other log."""
    table: dict[tuple[str, str], tuple[Event, str]] = {}
    for contract, name, kind in ACTIVITY_EVENTS:
        ev = event(contract, name)
        table[(addresses[contract].lower(), ev.topic)] = (ev, kind)

    def decode(log: dict[str, Any]) -> ActivityLog | None:
        topics = log["topics"]
        found = table.get((log["address"].lower(), topics[0] if topics else ""))
        if found is None:
            return None
        ev, kind = found
        args = _fixed_args(ev.name, topics, log["data"]) or _abi_args(ev, topics, log["data"])
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
        name: _json_value(name, kind, value)
        for name, kind, value in zip(ev.names, kinds, values, strict=True)
    }


def _json_value(name: str, kind: str, value: Any) -> Any:
    if kind.endswith("[]"):
        return [_json_value(name, kind[:-2], v) for v in value]
    if kind == "address":
        return checksum(value)
    if kind.startswith(("uint", "int")):
        return int(value) if name in NUMBER_ARGS else str(int(value))
    if kind == "bool":
        return bool(value)
    if isinstance(value, bytes):
        return "0x" + value.hex()
    return value
