"""ABI encoding and decoding: the contracts' tables in `abi/`, function calls, events, and
revert data decoded into `ChainCallReverted` by the errors every table declares."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, cast

from eth_abi import decode as abi_decode
from eth_abi import encode as abi_encode
from eth_typing import ABIEvent, ABIFunction
from eth_utils import (
    event_abi_to_log_topic,
    function_abi_to_4byte_selector,
    keccak,
    to_checksum_address,
)

from chain.errors import ChainCallReverted, ChainUnavailable

ABI_DIR = Path(__file__).resolve().parent / "abis"


def _type_of(param: dict[str, Any]) -> str:
    kind = param["type"]
    if kind.startswith("tuple"):
        inner = ",".join(_type_of(component) for component in param["components"])
        return f"({inner}){kind[len('tuple') :]}"
    return kind


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
                inputs=tuple(_type_of(p) for p in entry["inputs"]),
                outputs=tuple(_type_of(p) for p in entry["outputs"]),
            )
    raise KeyError(f"{contract}.{name}")


@cache
def event(contract: str, name: str) -> Event:
    for entry in abi(contract):
        if entry.get("type") == "event" and entry["name"] == name:
            return Event(
                name=name,
                topic="0x" + event_abi_to_log_topic(cast(ABIEvent, entry)).hex(),
                indexed=tuple(_type_of(p) for p in entry["inputs"] if p["indexed"]),
                data=tuple(_type_of(p) for p in entry["inputs"] if not p["indexed"]),
                names=tuple(p["name"] for p in entry["inputs"] if p["indexed"])
                + tuple(p["name"] for p in entry["inputs"] if not p["indexed"]),
            )
    raise KeyError(f"{contract}.{name}")


@cache
def _error_table() -> dict[bytes, tuple[str, tuple[str, ...]]]:
    table: dict[bytes, tuple[str, tuple[str, ...]]] = {
        bytes.fromhex("08c379a0"): ("Error", ("string",)),
        bytes.fromhex("4e487b71"): ("Panic", ("uint256",)),
    }
    for path in sorted(ABI_DIR.glob("*.json")):
        for entry in json.loads(path.read_text()):
            if entry.get("type") == "error":
                types = tuple(_type_of(p) for p in entry["inputs"])
                signature = f"{entry['name']}({','.join(types)})"
                table[keccak(text=signature)[:4]] = (entry["name"], types)
    return table


def _format_value(value: Any) -> str:
    if isinstance(value, bytes):
        return "0x" + value.hex()
    if isinstance(value, str) and len(value) == 42 and value.startswith("0x"):
        return to_checksum_address(value)
    return str(value)


def decode_revert(data: str | bytes | None) -> ChainCallReverted:
    """Revert data -> ChainCallReverted("Name(arg, …)"); custom errors by name."""
    if isinstance(data, str):
        data = bytes.fromhex(data.removeprefix("0x")) if data.startswith("0x") else b""
    if not data:
        return ChainCallReverted("reverted without a reason")
    known = _error_table().get(data[:4])
    if known is None:
        return ChainCallReverted(f"reverted with unknown error 0x{data[:4].hex()}")
    name, types = known
    try:
        args = tuple(abi_decode(types, data[4:]))
    except Exception:
        return ChainCallReverted(name, name=name)
    if name == "Error":
        return ChainCallReverted(str(args[0]), name=name, args=args)
    return ChainCallReverted(
        f"{name}({', '.join(_format_value(a) for a in args)})", name=name, args=args
    )
