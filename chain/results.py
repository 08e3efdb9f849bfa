"""What the gateway's reads return: frozen dataclasses of `int` and `str`, never web3's types."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from chain.reverts import Revert


def block_time(timestamp: int) -> datetime:
    """A block's timestamp (Unix seconds) as an aware UTC datetime."""
    return datetime.fromtimestamp(timestamp, tz=UTC)


@dataclass(frozen=True)
class Block:
    number: int
    hash: str
    timestamp: int

    @property
    def time(self) -> datetime:
        return block_time(self.timestamp)


@dataclass(frozen=True)
class TokenState:
    address: str
    symbol: str
    name: str
    decimals: int
    price_per_unit: int
    volatility_threshold: int
    strategy: str
    balance: int
    queued_balance: int


@dataclass(frozen=True)
class LatState:
    block: Block
    name: str
    symbol: str
    total_assets: int
    total_supply: int
    paused: bool
    max_nodes: int
    tokens: tuple[TokenState, ...]
    nodes: tuple[str, ...]
    # The price oracle's arePricesStale() and lastPriceUpdate() (Unix seconds); None where the
    # oracle does not answer them.
    prices_stale: bool | None = None
    last_price_update: int | None = None
    # The price oracle read from (the LAT's tokenRegistryOracle(), else the manifest's); "".
    oracle: str = ""


@dataclass(frozen=True)
class NodeAssetState:
    token: str
    strategy: str
    core_shares: int
    staked_amount: int


@dataclass(frozen=True)
class NodeState:
    address: str
    node_id: int
    operator: str  # ZERO_ADDRESS when undelegated
    assets: tuple[NodeAssetState, ...]


@dataclass(frozen=True)
class LogRef:
    """A log's position and its indexed/data values, decoded."""

    block_number: int
    block_hash: str
    tx_hash: str
    log_index: int
    address: str
    values: tuple


@dataclass(frozen=True)
class GasQuote:
    """eth_estimateGas and eth_gasPrice of a simulated call (wei); gas_limit is 0 on a revert."""

    gas_limit: int
    gas_price: int

    @property
    def fee(self) -> int:
        return self.gas_limit * self.gas_price


@dataclass(frozen=True)
class Simulation:
    """A deposit run as eth_call: the shares it returns, or the decoded revert."""

    success: bool
    shares: tuple[int, ...]  # one per deposited entry; empty on a revert
    reason: str  # the revert's text ("Pausable: paused"); "" on success
    gas: GasQuote  # on a revert: gas_limit 0 (nothing to estimate), the node's gas price
    revert: Revert | None = None  # the decoded revert; None on success
    # The oracle's arePricesStale() in the same batch, at the latest block: when true the deposit
    # refreshes every price first (the shares and the gas estimate include it). None where no
    # oracle was given or it does not answer (older deployments have no such view).
    prices_stale: bool | None = None
