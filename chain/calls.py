"""The chain gateway's calls: one eth_call, and many at one block (or at many blocks) batched
through Multicall3 `aggregate3` where the configured address holds code (asked once per
gateway), else as JSON-RPC batches of plain `eth_call`s, with the same typed results."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from chain.abi import Function, decode_revert, function
from chain.blocks import BlockReads
from chain.errors import ChainCallReverted, ChainError, ChainUnavailable
from chain.transport import hex_bytes

MULTICALL3_ADDRESS = "0xcA11bde05977b3631167028862bE2a173976CA11"

Call = tuple[str, Function, tuple]  # (to, function, arguments)


def _outcome(fn: Function, success: bool, data: bytes) -> tuple | ChainCallReverted:
    """One call's result as aggregate3's allowFailure gives it: the decoded outputs, or the
    revert; an empty answer where outputs are expected means no code at the address."""
    if not success:
        return decode_revert(data)
    if not data and fn.outputs:
        return ChainCallReverted(f"{fn.name}: no contract code at the address")
    return fn.decode(data)


def _plain_outcome(answer: Any, fn: Function) -> tuple | ChainCallReverted:
    """One plain eth_call's answer in a batch: its outputs, or its revert; another error of
    the node is raised."""
    if isinstance(answer, ChainCallReverted):
        return answer
    if isinstance(answer, ChainError):
        raise answer
    return _outcome(fn, True, hex_bytes(answer, "eth_call"))


def _required(result: tuple | ChainCallReverted) -> tuple:
    """A call's decoded outputs; its revert is raised."""
    if isinstance(result, ChainCallReverted):
        raise result
    return result


class CallReads(BlockReads):
    """Calls at a block; `multicall_address` is Multicall3's (None: never use one)."""

    multicall_address: str | None
    _multicall_lock: threading.Lock
    _multicall_has_code: bool | None

    def call(self, to: str, data: bytes, *, block: int, sender: str | None = None) -> bytes:
        tx: dict[str, str] = {"to": to, "data": "0x" + data.hex()}
        if sender:
            tx["from"] = sender
        return hex_bytes(self.transport.request("eth_call", [tx, hex(block)]), "eth_call")

    def multicall_available(self) -> bool:
        """Whether batched reads go through Multicall3: an address is configured and holds code
        (asked once per gateway, at the latest block, and remembered)."""
        if self.multicall_address is None:
            return False
        if self._multicall_has_code is None:
            with self._multicall_lock:
                if self._multicall_has_code is None:
                    self._multicall_has_code = bool(self.code_at(self.multicall_address))
        return self._multicall_has_code

    def multicall(self, calls: Sequence[Call], *, block: int) -> list[tuple | ChainCallReverted]:
        """Many view calls at one block, each allowed to fail: one eth_call to Multicall3's
        aggregate3 where it has code, else JSON-RPC batches of plain eth_calls. Both routes give
        the same list: each call's decoded outputs, or its ChainCallReverted."""
        if not calls:
            return []
        if self.multicall_available():
            results = self._aggregate3(calls, block=block)
            if results is not None:
                return results
        return self._plain_calls(calls, block=block)

    def _aggregate3(
        self, calls: Sequence[Call], *, block: int
    ) -> list[tuple | ChainCallReverted] | None:
        """The calls through aggregate3; None where Multicall3 has no code at that block (one
        older than its deployment, or a node that lost it since it was asked)."""
        aggregate3 = function("Multicall3", "aggregate3")
        if self.multicall_address is None:  # multicall_available() checked it already
            return None
        payload = [(to, True, fn.encode(*args)) for to, fn, args in calls]
        answer = self.call(self.multicall_address, aggregate3.encode(payload), block=block)
        if not answer:
            return None
        (results,) = aggregate3.decode(answer)
        if len(results) != len(calls):
            raise ChainUnavailable("Multicall3 answered the wrong number of results")
        return [
            _outcome(fn, success, data)
            for (success, data), (_, fn, _) in zip(results, calls, strict=True)
        ]

    def _plain_calls(self, calls: Sequence[Call], *, block: int) -> list[tuple | ChainCallReverted]:
        """The calls as plain eth_calls in JSON-RPC batches: needs no helper on the chain."""
        answers = self.transport.batch(
            [
                ("eth_call", [{"to": to, "data": "0x" + fn.encode(*args).hex()}, hex(block)])
                for to, fn, args in calls
            ]
        )
        return [
            _plain_outcome(answer, fn) for answer, (_, fn, _) in zip(answers, calls, strict=True)
        ]

    def multicall_at(
        self, calls: Sequence[Call], *, blocks: Sequence[int]
    ) -> dict[int, list[tuple | ChainCallReverted]]:
        """The same calls at each of many blocks (a chain's past), in JSON-RPC batches: one
        eth_call to aggregate3 per block where Multicall3 has code, else one eth_call per call;
        a block older than Multicall3's deployment is read the plain way. Each block's results
        as `multicall` gives them."""
        wanted = sorted(set(blocks))
        if not calls or not wanted:
            return {block: [] for block in wanted}
        out: dict[int, list[tuple | ChainCallReverted]] = {}
        plain = wanted
        if self.multicall_available() and self.multicall_address is not None:
            aggregate3 = function("Multicall3", "aggregate3")
            data = (
                "0x" + aggregate3.encode([(to, True, fn.encode(*a)) for to, fn, a in calls]).hex()
            )
            request = {"to": self.multicall_address, "data": data}
            answers = self.transport.batch([("eth_call", [request, hex(b)]) for b in wanted])
            plain = []
            for block, answer in zip(wanted, answers, strict=True):
                if isinstance(answer, ChainError):
                    raise answer
                raw = hex_bytes(answer, "eth_call")
                if not raw:  # Multicall3 has no code at that block yet
                    plain.append(block)
                    continue
                (results,) = aggregate3.decode(raw)
                if len(results) != len(calls):
                    raise ChainUnavailable("Multicall3 answered the wrong number of results")
                out[block] = [
                    _outcome(fn, ok, data)
                    for (ok, data), (_, fn, _) in zip(results, calls, strict=True)
                ]
        requests = [
            ("eth_call", [{"to": to, "data": "0x" + fn.encode(*a).hex()}, hex(block)])
            for block in plain
            for to, fn, a in calls
        ]
        answered = iter(self.transport.batch(requests))
        for block in plain:
            out[block] = [_plain_outcome(next(answered), fn) for _, fn, _ in calls]
        return out

    def _strict(self, calls: Sequence[Call], *, block: int) -> list[tuple]:
        return [_required(result) for result in self.multicall(calls, block=block)]
