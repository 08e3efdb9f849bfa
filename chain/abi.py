"""ABI encoding and decoding: the contracts' tables in `abis/`, function calls, events, and
revert data decoded into `ChainCallReverted` (chain/reverts.py)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, cast

from eth_abi import decode as abi_decode
from eth_abi import encode as abi_encode
from eth_typing import ABIEvent, ABIFunction
from eth_utils import event_abi_to_log_topic, function_abi_to_4byte_selector, keccak

from chain import reverts
from chain.abitypes import abi_type
from chain.errors import ChainCallReverted, ChainUnavailable

ABI_DIR = Path(__file__).resolve().parent / "abis"


@dataclass(frozen=True)
class Function:
    name: str
    selector: bytes
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]

    def encode(self, *args: Any) -> bytes:
        return self.selector + abi_encode(self.inputs, args)

    def decode(self, data: bytes) -> tuple:
        try:
            return tuple(abi_decode(self.outputs, data))
        except Exception as exc:
            raise ChainUnavailable(f"undecodable answer to {self.name}") from exc


@dataclass(frozen=True)
class Event:
    name: str
    topic: str
    indexed: tuple[str, ...]
    data: tuple[str, ...]
    # The arguments' names in `decode`'s order: the indexed ones first, then the data ones.
    names: tuple[str, ...] = ()

    def decode(self, topics: list[str], data: str) -> tuple:
        """A log's values (indexed first, then data) from its hex topics after the first and
        its hex data; raises whatever eth_abi raises on a malformed log."""
        indexed = tuple(
            abi_decode([kind], bytes.fromhex(topic[2:]))[0]
            for kind, topic in zip(self.indexed, topics, strict=True)
        )
        return indexed + tuple(abi_decode(self.data, bytes.fromhex(data[2:])))


@cache
def abi(contract: str) -> list[dict[str, Any]]:
    return json.loads((ABI_DIR / f"{contract}.json").read_text())


@cache
def function(contract: str, name: str) -> Function:
    for entry in abi(contract):
        if entry.get("type") == "function" and entry["name"] == name:
            return Function(
                name=name,
                selector=function_abi_to_4byte_selector(cast(ABIFunction, entry)),
                inputs=tuple(abi_type(p) for p in entry["inputs"]),
                outputs=tuple(abi_type(p) for p in entry["outputs"]),
            )
    raise KeyError(f"{contract}.{name}")


@cache
def event(contract: str, name: str) -> Event:
    for entry in abi(contract):
        if entry.get("type") == "event" and entry["name"] == name:
            return Event(
                name=name,
                topic="0x" + event_abi_to_log_topic(cast(ABIEvent, entry)).hex(),
                indexed=tuple(abi_type(p) for p in entry["inputs"] if p["indexed"]),
                data=tuple(abi_type(p) for p in entry["inputs"] if not p["indexed"]),
                names=tuple(p["name"] for p in entry["inputs"] if p["indexed"])
                + tuple(p["name"] for p in entry["inputs"] if not p["indexed"]),
            )
    raise KeyError(f"{contract}.{name}")


def function_of(signature: str, outputs: tuple[str, ...]) -> Function:
    """A function from its canonical signature ("f(address,uint256[])") and output types: for
    an interface named by chain.md that no contract of the devnet defines in full."""
    name, _, rest = signature.partition("(")
    return Function(
        name=name,
        selector=keccak(text=signature)[:4],
        inputs=_split_types(rest[:-1]),
        outputs=outputs,
    )


def event_of(name: str, indexed: tuple[str, ...], data: tuple[str, ...]) -> Event:
    """An event from its name and canonical argument types, indexed ones first as in the
    signature (every event the rewards APY reads lists its indexed arguments first)."""
    signature = f"{name}({','.join(indexed + data)})"
    return Event(name=name, topic="0x" + keccak(text=signature).hex(), indexed=indexed, data=data)


def _split_types(types: str) -> tuple[str, ...]:
    """ "address,(uint8,address)[],uint256" -> its top-level types."""
    out, depth, start = [], 0, 0
    for index, char in enumerate(types):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            out.append(types[start:index])
            start = index + 1
    if types:
        out.append(types[start:])
    return tuple(out)


def decode_revert(data: str | bytes | None, *, message: str = "") -> ChainCallReverted:
    """Revert data (and the node's error message, for nodes that give the reason only there)
    -> ChainCallReverted with the decoded revert (chain/reverts.py)."""
    revert = reverts.decode(data, message=message)
    return ChainCallReverted(revert.text, name=revert.name, args=revert.args, revert=revert)
