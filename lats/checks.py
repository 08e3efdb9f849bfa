"""What every read of a LAT's chain checks first: that the node is on the LAT's chain and not
behind what the service stored, and how far behind the head the readers stay.

Shared by the state read (lats/state.py), the AVS metadata read and the indexers (activity/).
"""

from __future__ import annotations

from django.conf import settings

from chain.errors import ChainError
from chain.gateway import Gateway
from chain.results import Block
from lats.models import Lat


class ChainMismatch(ChainError):
    """The node is on another chain than the LAT: nothing is read, deleted or written."""


class NodeLagging(ChainError):
    """The node is behind what the service already stored: the run is skipped."""


def chain_confirmations(chain_id: int) -> int:
    """Blocks behind the head that the log readers stay (CHAIN_CONFIRMATIONS[_<chainId>])."""
    return settings.CHAIN_CONFIRMATIONS_BY_CHAIN.get(chain_id, settings.CHAIN_CONFIRMATIONS)


def reorg_max_depth(chain_id: int) -> int:
    """The deepest reorg handled by re-indexing (REORG_MAX_DEPTH[_<chainId>])."""
    return settings.REORG_MAX_DEPTH_BY_CHAIN.get(chain_id, settings.REORG_MAX_DEPTH)


def check_chain(*, lat: Lat, gateway: Gateway) -> None:
    """Raise ChainMismatch unless the node is on the LAT's chain."""
    chain_id = gateway.chain_id()
    if chain_id != lat.chain_id:
        raise ChainMismatch(
            f"the node is on chain {chain_id}, not on chain {lat.chain_id} of this LAT; "
            "nothing was read or written (check RPC_URL_<chainId>)"
        )


def check_not_behind(head: Block, known: int | None, what: str) -> None:
    """Raise NodeLagging when the node's head is below a block the service already stored."""
    if known is not None and head.number < known:
        raise NodeLagging(
            f"the node is lagging: its head is block {head.number}, below {what} {known}; "
            "this run was skipped"
        )
