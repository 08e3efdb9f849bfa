"""The chain gateway's errors: raised by the ABI decoding, the transport and the reads alike."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from chain.reverts import Revert


class ChainError(Exception):
    """Base of the gateway's errors."""


class ChainUnavailable(ChainError):
    """The node could not be reached, timed out, or answered something that is not JSON-RPC.

    `refused` is set when the node answered with a JSON-RPC error (a limit it enforces, such as
    the block range of eth_getLogs) rather than failing to answer.
    """

    def __init__(self, message: str, *, refused: bool = False) -> None:
        super().__init__(message)
        self.refused = refused


class ChainCallReverted(ChainError):
    """A call reverted; `reason` is the decoded revert's text ("UnsupportedAsset(0x…)",
    "Pausable: paused"), `revert` the decoded revert itself (chain/reverts.py) where the node
    gave one (None for a call the gateway itself judged failed, such as one to no code)."""

    def __init__(
        self, reason: str, *, name: str = "", args: tuple = (), revert: Revert | None = None
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        self.name = name
        self.args_decoded = args
        self.revert = revert
