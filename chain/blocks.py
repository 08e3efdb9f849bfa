"""The chain gateway's blocks: the chain id, heads, blocks by number and contract code, as
frozen `results.Block`s. The base of the gateway's rooms (chain/gateway.py)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from chain.errors import ChainUnavailable
from chain.results import Block
from chain.transport import Transport

if TYPE_CHECKING:
    from web3 import Web3


class BlockReads:
    """Blocks and code of one chain through one node's `transport`."""

    transport: Transport

    @property
    def w3(self) -> Web3:
        return self.transport.w3

    @property
    def batch_size(self) -> int:
        return self.transport.batch_size

    def chain_id(self) -> int:
        return int(self.transport.request("eth_chainId", []), 16)

    def _block(self, raw: Any) -> Block:
        if not isinstance(raw, dict):
            raise ChainUnavailable("the node does not know that block")
        try:
            return Block(int(raw["number"], 16), raw["hash"], int(raw["timestamp"], 16))
        except (KeyError, TypeError, ValueError) as exc:
            raise ChainUnavailable("the node answered a malformed block") from exc

    def head_number(self) -> int:
        """The node's latest block number (one eth_blockNumber)."""
        try:
            return int(self.transport.request("eth_blockNumber", []), 16)
        except (TypeError, ValueError) as exc:
            raise ChainUnavailable("the node answered a malformed block number") from exc

    def head(self, *, confirmations: int = 0) -> Block:
        return self.block(max(self.head_number() - confirmations, 0))

    def block(self, number: int) -> Block:
        return self._block(self.transport.request("eth_getBlockByNumber", [hex(number), False]))

    def block_or_none(self, number: int) -> Block | None:
        """The block, or None where the node has none at that height (a shorter chain)."""
        raw = self.transport.request("eth_getBlockByNumber", [hex(number), False])
        return None if raw is None else self._block(raw)

    def blocks(self, numbers: Iterable[int], *, missing_ok: bool = False) -> dict[int, Block]:
        """Blocks by number in JSON-RPC batches; with missing_ok, absent ones are left out."""
        wanted = sorted(set(numbers))
        results = self.transport.batch([("eth_getBlockByNumber", [hex(n), False]) for n in wanted])
        out = {}
        for number, raw in zip(wanted, results, strict=True):
            if isinstance(raw, Exception):
                raise raw
            if raw is None and missing_ok:
                continue
            out[number] = self._block(raw)
        return out

    def code_at(self, address: str, *, block: int | str = "latest") -> bytes:
        raw = self.transport.request(
            "eth_getCode", [address, block if isinstance(block, str) else hex(block)]
        )
        return bytes.fromhex(str(raw).removeprefix("0x"))
