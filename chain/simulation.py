"""The chain gateway's deposits: a deposit's calldata, and its simulation against the node
within the caller's deadline (shares, gas, whether the oracle's prices are stale)."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from chain import depositcall
from chain.abi import function
from chain.deadline import DeadlineClient
from chain.errors import ChainCallReverted, ChainUnavailable
from chain.latreads import LatReads
from chain.results import (
    GasQuote,
    Simulation,
)


class DepositReads(LatReads):
    """Deposits built and simulated, never signed."""

    @staticmethod
    def deposit_calldata(*, assets: Sequence[str], amounts: Sequence[int], receiver: str) -> str:
        return "0x" + depositcall.deposit_calldata(assets, amounts, receiver).hex()

    @functools.cached_property
    def deadline_client(self) -> DeadlineClient:
        """The node's JSON-RPC within a caller's deadline (simulate_deposit's route)."""
        url = getattr(self.w3.provider, "endpoint_uri", None)
        if not isinstance(url, str):
            raise ChainUnavailable("a simulation needs a node reached over HTTP")
        return DeadlineClient(url, chain=self.transport.chain)

    def simulate_deposit(
        self, *, lat: str, calldata: str, sender: str, deadline: float, oracle: str = ""
    ) -> Simulation:
        """eth_call, eth_estimateGas and eth_gasPrice in one JSON-RPC batch, at the latest block,
        answered by `deadline` (a time.monotonic() value) or given up then, in the caller's
        thread (chain/deadline.py); with the LAT's price `oracle`, its `arePricesStale()` in
        the same batch.

        The deposit runs exactly as a transaction would (its own stale-price refresh included),
        never a view in its place. A revert of either call is a `Simulation` with
        `success=False` and the decoded revert; only a node that cannot be reached, answers
        garbage or is too slow raises (`ChainUnavailable`; past the deadline, caused by a
        TimeoutError).
        """
        tx = {"from": sender, "to": lat, "data": calldata, "value": "0x0"}
        calls: list[tuple[str, list[Any]]] = [
            ("eth_call", [tx, "latest"]),
            ("eth_estimateGas", [tx, "latest"]),
            ("eth_gasPrice", []),
        ]
        if oracle:
            stale_call = "0x" + function("TokenRegistryOracle", "arePricesStale").selector.hex()
            calls.append(("eth_call", [{"to": oracle, "data": stale_call}, "latest"]))
        answers = self.deadline_client.batch(calls, deadline=deadline)
        call, gas, price = answers[:3]
        for result in (call, gas, price):
            if isinstance(result, ChainUnavailable):
                raise result
        try:
            gas_price = int(price, 16)
        except (TypeError, ValueError) as exc:
            raise ChainUnavailable("the node answered eth_gasPrice with garbage") from exc
        stale = _prices_stale(answers[3]) if oracle else None
        for result in (call, gas):
            if isinstance(result, ChainCallReverted):
                return Simulation(
                    success=False,
                    shares=(),
                    reason=result.reason,
                    gas=GasQuote(0, gas_price),
                    revert=result.revert,
                    prices_stale=stale,
                )
        if call == "0x":  # a call to an address without code "succeeds" with nothing
            return Simulation(
                success=False,
                shares=(),
                reason="no contract code at the LAT address",
                gas=GasQuote(0, gas_price),
                prices_stale=stale,
            )
        try:
            shares = depositcall.deposit_shares(bytes.fromhex(call[2:]))
            quote = GasQuote(gas_limit=int(gas, 16), gas_price=gas_price)
        except (TypeError, ValueError) as exc:
            raise ChainUnavailable("the node answered the simulation with garbage") from exc
        return Simulation(success=True, shares=shares, reason="", gas=quote, prices_stale=stale)


def _prices_stale(answer: Any) -> bool | None:
    """arePricesStale()'s answer: True or False, None where it reverted (no such view) or the
    answer is not one ABI-encoded bool."""
    if not isinstance(answer, str) or not answer.startswith("0x") or len(answer) != 66:
        return None
    try:
        value = int(answer, 16)
    except ValueError:
        return None
    return bool(value) if value in (0, 1) else None
