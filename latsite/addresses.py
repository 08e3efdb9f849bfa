"""Ethereum addresses, defined once: the pattern, the check and the EIP-55 form."""

from __future__ import annotations

import re

from django.core.validators import RegexValidator
from eth_utils import to_checksum_address

ADDRESS_PATTERN = r"^0x[a-fA-F0-9]{40}$"
ZERO_ADDRESS = "0x0000000000000000000000000000000000000000"
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
    return to_checksum_address(address)
