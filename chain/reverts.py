"""Revert data decoded, whatever its kind: `Error(string)` (OpenZeppelin 4.9's reverts, such as
"Pausable: paused"), `Panic(uint256)` with the meaning of its code, a custom error the service
knows (the LAT contracts' own, OpenZeppelin 5's, and every error in the ABIs of `abis/`) with its
arguments, an unknown selector shown as such, or no data at all.

The custom errors are listed by signature here, not only read from the ABIs of `abis/`, because
a deployment's contracts are not the project's devnet: chain.md names the errors a LAT deployment
reverts with, and a token's own errors (OpenZeppelin 5's ERC-20) come through a deposit too.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from eth_abi import decode as abi_decode
from eth_utils import keccak, to_checksum_address

from chain.abitypes import abi_type

ABI_DIR = Path(__file__).resolve().parent / "abis"

ERROR_SELECTOR = keccak(text="Error(string)")[:4]  # 0x08c379a0
PANIC_SELECTOR = keccak(text="Panic(uint256)")[:4]  # 0x4e487b71

# Solidity's panic codes (docs.soliditylang.org, "Panic via assert and Error via require").
PANIC_CODES: dict[int, str] = {
    0x00: "generic compiler panic",
    0x01: "assertion failed",
    0x11: "arithmetic overflow or underflow",
    0x12: "division or modulo by zero",
    0x21: "conversion to an invalid enum value",
    0x22: "incorrectly encoded storage byte array",
    0x31: "pop() on an empty array",
    0x32: "array index out of bounds",
    0x41: "too much memory allocated",
    0x51: "call to a zero-initialized internal function",
}

# Custom errors a LAT deployment (chain.md) or the tokens it moves can revert with, by signature.
KNOWN_ERRORS: tuple[str, ...] = (
    # LiquidToken (Mainnet v1 and older)
    "ArrayLengthMismatch()",
    "ZeroAmount()",
    "ZeroAddress()",
    "UnsupportedAsset(address)",
    "ZeroShares()",
    "NotLiquidTokenManager(address)",
    "InsufficientBalance(address,uint256,uint256)",
    "AssetBalanceOutOfSync(address,uint256,uint256)",
    "PriceUpdateFailed()",
    "PriceUpdateRejected()",
    "PricesRemainStale()",
    "AssetPriceInvalid(address)",
    # LiquidTokenManager
    "StrategyNotFound(address)",
    "TokenNotSupported(address)",
    "TokenExists(address)",
    "TokenInUse(address)",
    "TokenForStrategyNotFound(address)",
    "InvalidStakingAmount(uint256)",
    "LengthMismatch(uint256,uint256)",
    "InvalidNodeId(uint256)",
    "InvalidDecimals()",
    "InvalidPrice()",
    "InvalidThreshold()",
    "InvalidPriceSource()",
    "TokenPriceFetchFailed()",
    "VolatilityThresholdHit(address,uint256)",
    # TokenRegistryOracle
    "NoFreshPrice(address)",
    "InvalidUpdater(address)",
    # StakerNodeCoordinator and StakerNode
    "TooManyStakerNodes(uint256)",
    "NodeIdOutOfRange(uint256)",
    "UnauthorizedAccess(address,bytes32)",
    "NodeIsDelegated(address)",
    "NodeIsNotDelegated()",
    # OpenZeppelin 5 (deployments built on it, and tokens)
    "EnforcedPause()",
    "ExpectedPause()",
    "AccessControlUnauthorizedAccount(address,bytes32)",
    "AccessControlBadConfirmation()",
    "ReentrancyGuardReentrantCall()",
    "ERC20InsufficientBalance(address,uint256,uint256)",
    "ERC20InsufficientAllowance(address,uint256,uint256)",
    "ERC20InvalidSender(address)",
    "ERC20InvalidReceiver(address)",
    "ERC20InvalidApprover(address)",
    "ERC20InvalidSpender(address)",
    "SafeERC20FailedOperation(address)",
    "SafeERC20FailedDecreaseAllowance(address,uint256,uint256)",
    "OwnableUnauthorizedAccount(address)",
    "OwnableInvalidOwner(address)",
    "InvalidInitialization()",
    "NotInitializing()",
    "AddressEmptyCode(address)",
    "AddressInsufficientBalance(address)",
    "FailedInnerCall()",
    "FailedCall()",
    "ERC1967InvalidImplementation(address)",
    "ERC1967InvalidAdmin(address)",
    "ERC1967InvalidBeacon(address)",
    "ERC1967NonPayable()",
    "ProxyDeniedAdminAccess()",
)

# The reason some nodes give only in the error message ("execution reverted: Pausable: paused").
_MESSAGE_REASON = re.compile(r"execution reverted:\s*(.+)", re.IGNORECASE | re.DOTALL)

EMPTY = "empty"  # no revert data
STRING = "error"  # Error(string)
PANIC = "panic"  # Panic(uint256)
CUSTOM = "custom"  # a custom error the service knows
UNKNOWN = "unknown"  # a selector the service does not know


@dataclass(frozen=True)
class Revert:
    """One decoded revert.

    `text` is what a person reads: the string of an `Error(string)` ("Pausable: paused"),
    "Panic(0x11: arithmetic overflow or underflow)", a custom error with its arguments
    ("UnsupportedAsset(0xAb…)"), "unknown error 0x12345678", "reverted without a reason"."""

    kind: str  # EMPTY, STRING, PANIC, CUSTOM or UNKNOWN
    text: str
    name: str = ""  # "Error", "Panic" or the custom error's name; "" when unknown or empty
    signature: str = ""  # "Error(string)", "UnsupportedAsset(address)"; "" when unknown or empty
    args: tuple[Any, ...] = ()  # decoded (addresses checksummed); () when undecodable
    data: str = "0x"  # the raw revert data, 0x-hex

    @property
    def selector(self) -> str:
        """The first four bytes of the data, 0x-hex; "" when there are fewer."""
        return self.data[:10] if len(self.data) >= 10 else ""

    @property
    def message(self) -> str:
        """The string of an `Error(string)`; "" for any other kind."""
        return str(self.args[0]) if self.kind == STRING and self.args else ""

    @property
    def panic_code(self) -> int | None:
        return int(self.args[0]) if self.kind == PANIC and self.args else None


def selector(signature: str) -> str:
    """The 0x-hex selector of an error or function signature ("PriceUpdateFailed()")."""
    return "0x" + keccak(text=signature)[:4].hex()


def _types(signature: str) -> tuple[str, ...]:
    inner = signature[signature.index("(") + 1 : -1]
    return tuple(_split_types(inner)) if inner else ()


def _split_types(inner: str) -> list[str]:
    """Top-level comma split of a type list ("(address,uint96)[],address" has two types)."""
    parts, depth, start = [], 0, 0
    for i, char in enumerate(inner):
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(inner[start:i])
            start = i + 1
    parts.append(inner[start:])
    return parts


@cache
def error_table() -> dict[bytes, tuple[str, str, tuple[str, ...]]]:
    """selector -> (name, signature, argument types): KNOWN_ERRORS, then every error the ABIs of
    `abis/` declare."""
    table: dict[bytes, tuple[str, str, tuple[str, ...]]] = {}
    for signature in KNOWN_ERRORS:
        table[keccak(text=signature)[:4]] = (signature.split("(")[0], signature, _types(signature))
    for path in sorted(ABI_DIR.glob("*.json")):
        for entry in json.loads(path.read_text()):
            if entry.get("type") == "error":
                types = tuple(abi_type(p) for p in entry["inputs"])
                signature = f"{entry['name']}({','.join(types)})"
                table.setdefault(keccak(text=signature)[:4], (entry["name"], signature, types))
    return table


def _display(value: Any, kind: str) -> str:
    if kind == "address":
        return str(value)
    if isinstance(value, bytes):
        return "0x" + value.hex()
    if isinstance(value, tuple | list):
        return "(" + ", ".join(_display(v, "") for v in value) + ")"
    return str(value)


def _readable(value: Any, kind: str) -> Any:
    if kind == "address":
        return to_checksum_address(value)
    if kind.endswith("[]") and isinstance(value, tuple | list):
        return tuple(_readable(v, kind[:-2]) for v in value)
    return value


def _as_bytes(data: str | bytes | None) -> bytes:
    if data is None:
        return b""
    if isinstance(data, bytes):
        return data
    raw = data.removeprefix("0x") if data.startswith("0x") else ""
    try:
        return bytes.fromhex(raw)
    except ValueError:
        return b""


def decode(data: str | bytes | None, *, message: str = "") -> Revert:
    """Decode revert data (0x-hex or bytes; None or empty when the node gave none).

    Where a node gives no data but says the reason in its error `message` ("execution reverted:
    Pausable: paused"), that string is taken as the `Error(string)` it stands for."""
    raw = _as_bytes(data)
    hex_data = "0x" + raw.hex()
    if not raw:
        found = _MESSAGE_REASON.search(message or "")
        if found and found.group(1).strip():
            text = found.group(1).strip()
            return Revert(STRING, text, "Error", "Error(string)", (text,), hex_data)
        return Revert(EMPTY, "reverted without a reason", data=hex_data)
    selector, body = raw[:4], raw[4:]
    if selector == ERROR_SELECTOR:
        try:
            (text,) = abi_decode(["string"], body)
        except Exception:
            return Revert(
                STRING,
                "Error(string) with undecodable data",
                "Error",
                "Error(string)",
                data=hex_data,
            )
        return Revert(STRING, text, "Error", "Error(string)", (text,), hex_data)
    if selector == PANIC_SELECTOR:
        try:
            (code,) = abi_decode(["uint256"], body)
        except Exception:
            return Revert(
                PANIC, "Panic with undecodable data", "Panic", "Panic(uint256)", data=hex_data
            )
        meaning = PANIC_CODES.get(code, "unknown panic code")
        return Revert(
            PANIC, f"Panic(0x{code:02x}: {meaning})", "Panic", "Panic(uint256)", (code,), hex_data
        )
    known = error_table().get(selector)
    if known is None:
        return Revert(UNKNOWN, f"unknown error 0x{selector.hex()}", data=hex_data)
    name, signature, types = known
    try:
        values = abi_decode(list(types), body)
    except Exception:
        return Revert(
            CUSTOM, f"{signature} with undecodable arguments", name, signature, data=hex_data
        )
    args = tuple(_readable(v, t) for v, t in zip(values, types, strict=True))
    shown = ", ".join(_display(v, t) for v, t in zip(args, types, strict=True))
    return Revert(CUSTOM, f"{name}({shown})", name, signature, args, hex_data)
