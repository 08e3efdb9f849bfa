"""The chain gateway's reads: the runtime client of a node.

Every read takes a block number so that one refresh sees one state; reads are batched: through
Multicall3 `aggregate3` where the configured address holds code (asked once per gateway), else as
JSON-RPC batches of plain `eth_call`s, chunked at `batch_size` requests, with the same typed
results at the same block. Calls are encoded and decoded by `abi`, sent by `transport`, and
returned as the frozen dataclasses of `results`. Nothing here touches the ORM or Django's
settings (only `gateway_for` reads them).

The gateway is built in rooms, each a class the next extends: `chain.blocks` (heads, blocks,
code), `chain.calls` (calls and Multicall3), `chain.logs` (eth_getLogs, shared windows, scans),
`chain.latreads` (a LAT's state and nodes) and `chain.simulation` (deposits); `Gateway` joins
them with its transport, and this module keeps one per process and node.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from eth_utils import to_checksum_address

from chain.calls import MULTICALL3_ADDRESS, Call
from chain.latreads import LT_ORACLE, ORACLE_LAST_UPDATE, ORACLE_STALE, optional_function
from chain.logs import LogWindow, read_ahead, read_ahead_gathered, scan_ranges
from chain.simulation import DepositReads
from chain.transport import DEFAULT_BATCH_SIZE, Transport, http_web3, rpc_url_for
from core.telemetry import UNKNOWN_CHAIN

if TYPE_CHECKING:
    from web3 import Web3

__all__ = [
    "LT_ORACLE",
    "MULTICALL3_ADDRESS",
    "ORACLE_LAST_UPDATE",
    "ORACLE_STALE",
    "Call",
    "Gateway",
    "LogWindow",
    "gateway_for",
    "gateway_for_url",
    "optional_function",
    "read_ahead",
    "read_ahead_gathered",
    "scan_ranges",
]


class Gateway(DepositReads):
    """Reads one chain through one node.

    `multicall` is the address of a Multicall3 on that chain ("" or None: never use one); whether
    it holds code is asked on the first batched read and remembered. `batch_size` is the most
    requests one JSON-RPC batch carries.
    """

    def __init__(
        self,
        w3: Web3,
        *,
        multicall: str | None = MULTICALL3_ADDRESS,
        batch_size: int = DEFAULT_BATCH_SIZE,
        chain: str = UNKNOWN_CHAIN,
    ) -> None:
        self.transport = Transport(w3, batch_size=batch_size, chain=chain)
        self.multicall_address = to_checksum_address(multicall) if multicall else None
        self._multicall_lock = threading.Lock()
        self._multicall_has_code: bool | None = None
        self._window: LogWindow | None = None
        self._beacons: dict[str, str] = {}  # coordinator (lower case): its node beacon


# --- one gateway per process and node -------------------------------------------------------

_lock = threading.Lock()
_gateways: dict[tuple[str, float, str, int, int | None], Gateway] = {}


def gateway_for_url(
    url: str,
    *,
    timeout: float,
    multicall: str | None = MULTICALL3_ADDRESS,
    batch_size: int = DEFAULT_BATCH_SIZE,
    chain_id: int | None = None,
) -> Gateway:
    """The process's gateway to the node at `url` (one per URL and options, so that each
    remembers whether its Multicall3 has code); `chain_id` labels its metrics."""
    key = (url, timeout, multicall or "", batch_size, chain_id)
    with _lock:
        gateway = _gateways.get(key)
        if gateway is None:
            gateway = Gateway(
                http_web3(url, timeout=timeout),
                multicall=multicall,
                batch_size=batch_size,
                chain=UNKNOWN_CHAIN if chain_id is None else str(chain_id),
            )
            _gateways[key] = gateway
        return gateway


def gateway_for(chain_id: int, *, timeout: float | None = None) -> Gateway:
    """The gateway of a chain, from RPC_URL_<chainId> or RPC_URL, with that chain's Multicall3
    address (MULTICALL3_ADDRESS_<chainId> or MULTICALL3_ADDRESS; empty: off) and RPC_BATCH_SIZE.
    `timeout` defaults to RPC_TIMEOUT (simulate-deposit passes SIMULATE_TIMEOUT)."""
    from django.conf import settings

    url = rpc_url_for(chain_id, urls=settings.RPC_URLS, default=settings.RPC_URL)
    return gateway_for_url(
        url,
        timeout=settings.RPC_TIMEOUT if timeout is None else timeout,
        multicall=settings.MULTICALL3_ADDRESSES.get(chain_id, settings.MULTICALL3_ADDRESS),
        batch_size=settings.RPC_BATCH_SIZE,
        chain_id=chain_id,
    )
