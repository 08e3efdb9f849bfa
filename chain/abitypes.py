"""ABI parameter types as selectors and eth_abi spell them."""

from __future__ import annotations

from typing import Any


def abi_type(param: dict[str, Any]) -> str:
    """A parameter's canonical ABI type, a tuple spelled out as "(t1,t2)" (for selectors and
    eth_abi)."""
    kind = param["type"]
    if kind.startswith("tuple"):
        inner = ",".join(abi_type(component) for component in param["components"])
        return f"({inner}){kind[len('tuple') :]}"
    return kind
