"""Ethereum addresses, defined once: the pattern, the check and the EIP-55 form."""

from __future__ import annotations

import re
from functools import lru_cache

from django.core.validators import RegexValidator
from eth_hash.auto import keccak

ADDRESS_PATTERN = r"^0x[a-fA-F0-9]{40}$"
ZERO_ADDRESS = "0x0000000000000000000000000000000000000000"
# EigenLayer's beacon-chain ETH strategy; as a LAT's base asset, its unit of account is ETH.
BEACON_CHAIN_ETH = "0xbeaC0eeEeeeeEEeEeEEEEeeEEeEeeeEeeEEBEaC0"
# fullmatch, not match: `$` would let a trailing newline through.
_ADDRESS_RE = re.compile(r"0x[a-fA-F0-9]{40}")

ADDRESS_VALIDATOR = RegexValidator(ADDRESS_PATTERN, "Enter an address 0x + 40 hex digits.")


def is_address(value: object) -> bool:
    """0x and 40 hex digits, any letter case (the checksum is not enforced)."""
    return isinstance(value, str) and _ADDRESS_RE.fullmatch(value) is not None


def address_error(field: str) -> str:
    """The message every refusal of a malformed address gives."""
    return f"{field} must be an address matching {ADDRESS_PATTERN}."


def checksum(address: str) -> str:
    """EIP-55 form of a well-formed address; ValueError for anything else."""
    if not is_address(address):
        raise ValueError(f"not an address (0x + 40 hex digits): {address!r}")
    return _eip55(address[2:].lower())


@lru_cache(maxsize=1 << 16)
def _eip55(hex40: str) -> str:
    """EIP-55 of 40 lower-case hex digits: a letter is upper case where the Keccak-256 of the
    digits has a nibble of 8 or more. One hash, without eth_utils' validation layers (pages
    and backfills checksum thousands; the same addresses recur, hence the cache)."""
    digest = keccak(hex40.encode()).hex()
    return "0x" + "".join(
        c.upper() if c > "9" and digest[i] > "7" else c for i, c in enumerate(hex40)
    )


def is_beacon_chain_eth(address: str) -> bool:
    return address.lower() == BEACON_CHAIN_ETH.lower()
