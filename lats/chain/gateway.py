"""The chain gateway: the only code that talks JSON-RPC to a node.

One `Web3` per process and chain id, with an explicit timeout. Every read takes a block number so
that one refresh sees one state; reads are batched: through Multicall3 `aggregate3` where the
configured address holds code (asked once per gateway), else as JSON-RPC batches of plain
`eth_call`s, chunked at `batch_size` requests, with the same typed results at the same block.
Results are frozen dataclasses of `int` and `str`. Transport failures and garbage become
`ChainUnavailable`; reverts become `ChainCallReverted` with the decoded reason. web3 itself never
retries (one retry policy: the jobs'). Nothing here touches the ORM or Django's settings (only
`gateway_for` reads them).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, TypeVar

import requests
from eth_abi import decode as abi_decode
from eth_abi import encode as abi_encode
from eth_utils import (
    event_abi_to_log_topic,
    function_abi_to_4byte_selector,
    keccak,
    to_checksum_address,
)
from web3 import HTTPProvider, Web3

BEACON_CHAIN_STRATEGY = "0xbeaC0eeEeeeeEEeEeEEEEeeEEeEeeeEeeEEBEaC0"
MULTICALL3_ADDRESS = "0xcA11bde05977b3631167028862bE2a173976CA11"
DEFAULT_BATCH_SIZE = 100
ZERO_ADDRESS = "0x0000000000000000000000000000000000000000"
ABI_DIR = Path(__file__).resolve().parent / "abi"
T = TypeVar("T")


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
    """A call reverted; `reason` is the decoded revert ("UnsupportedAsset(0x…)")."""

    def __init__(self, reason: str, *, name: str = "", args: tuple = ()) -> None:
        super().__init__(reason)
        self.reason = reason
        self.name = name
        self.args_decoded = args


# --- ABI ------------------------------------------------------------------------------------


def _type_of(param: dict[str, Any]) -> str:
    kind = param["type"]
    if kind.startswith("tuple"):
        inner = ",".join(_type_of(component) for component in param["components"])
        return f"({inner}){kind[len('tuple') :]}"
    return kind


@dataclass(frozen=True)
class Function:
    name: str
    selector: bytes
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]

    def encode(self, *args: Any) -> bytes:
        return self.selector + abi_encode(self.inputs, args)

    def decode(self, data: bytes) -> tuple:
        try:
            return tuple(abi_decode(self.outputs, data))
        except Exception as exc:
            raise ChainUnavailable(f"undecodable answer to {self.name}") from exc


@dataclass(frozen=True)
class Event:
    name: str
    topic: str
    indexed: tuple[str, ...]
    data: tuple[str, ...]


@cache
def abi(contract: str) -> list[dict[str, Any]]:
    return json.loads((ABI_DIR / f"{contract}.json").read_text())


@cache
def function(contract: str, name: str) -> Function:
    for entry in abi(contract):
        if entry.get("type") == "function" and entry["name"] == name:
            return Function(
                name=name,
                selector=function_abi_to_4byte_selector(entry),
                inputs=tuple(_type_of(p) for p in entry["inputs"]),
                outputs=tuple(_type_of(p) for p in entry["outputs"]),
            )
    raise KeyError(f"{contract}.{name}")


@cache
def event(contract: str, name: str) -> Event:
    for entry in abi(contract):
        if entry.get("type") == "event" and entry["name"] == name:
            return Event(
                name=name,
                topic="0x" + event_abi_to_log_topic(entry).hex(),
                indexed=tuple(_type_of(p) for p in entry["inputs"] if p["indexed"]),
                data=tuple(_type_of(p) for p in entry["inputs"] if not p["indexed"]),
            )
    raise KeyError(f"{contract}.{name}")


@cache
def _error_table() -> dict[bytes, tuple[str, tuple[str, ...]]]:
    table: dict[bytes, tuple[str, tuple[str, ...]]] = {
        bytes.fromhex("08c379a0"): ("Error", ("string",)),
        bytes.fromhex("4e487b71"): ("Panic", ("uint256",)),
    }
    for path in sorted(ABI_DIR.glob("*.json")):
        for entry in json.loads(path.read_text()):
            if entry.get("type") == "error":
                types = tuple(_type_of(p) for p in entry["inputs"])
                signature = f"{entry['name']}({','.join(types)})"
                table[keccak(text=signature)[:4]] = (entry["name"], types)
    return table


def _format_value(value: Any) -> str:
    if isinstance(value, bytes):
        return "0x" + value.hex()
    if isinstance(value, str) and len(value) == 42 and value.startswith("0x"):
        return to_checksum_address(value)
    return str(value)


def decode_revert(data: str | bytes | None) -> ChainCallReverted:
    """Revert data -> ChainCallReverted("Name(arg, …)"); custom errors by name."""
    if isinstance(data, str):
        data = bytes.fromhex(data.removeprefix("0x")) if data.startswith("0x") else b""
    if not data:
        return ChainCallReverted("reverted without a reason")
    known = _error_table().get(data[:4])
    if known is None:
        return ChainCallReverted(f"reverted with unknown error 0x{data[:4].hex()}")
    name, types = known
    try:
        args = tuple(abi_decode(types, data[4:]))
    except Exception:
        return ChainCallReverted(name, name=name)
    if name == "Error":
        return ChainCallReverted(str(args[0]), name=name, args=args)
    return ChainCallReverted(
        f"{name}({', '.join(_format_value(a) for a in args)})", name=name, args=args
    )


# --- typed results --------------------------------------------------------------------------


@dataclass(frozen=True)
class Block:
    number: int
    hash: str
    timestamp: int


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
    operator: str  # zero address when undelegated
    assets: tuple[NodeAssetState, ...]


@dataclass(frozen=True)
class DepositLog:
    kind: str  # "AssetDeposited" or "Deposit"
    tx_hash: str
    log_index: int
    block_number: int
    block_hash: str
    sender: str
    receiver: str
    asset: str
    amount: int
    shares: int
    block_timestamp: int | None = None  # where the node includes it in logs


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
    """A deposit run as eth_call: the shares it returns, or the decoded revert reason."""

    success: bool
    shares: tuple[int, ...]  # one per deposited entry; empty on a revert
    reason: str  # "" on success
    gas: GasQuote  # on a revert: gas_limit 0 (nothing to estimate), the node's gas price


# --- the gateway ----------------------------------------------------------------------------


def _address_topic(topic: str) -> str:
    return to_checksum_address("0x" + topic[-40:])


def _hex_bytes(raw: Any, method: str) -> bytes:
    if not isinstance(raw, str) or not raw.startswith("0x"):
        raise ChainUnavailable(f"the node answered {method} with something that is not hex data")
    try:
        return bytes.fromhex(raw[2:])
    except ValueError as exc:
        raise ChainUnavailable(f"the node answered {method} with malformed hex data") from exc


def _outcome(fn: Function, success: bool, data: bytes) -> tuple | ChainCallReverted:
    """One call's result as aggregate3's allowFailure gives it: the decoded outputs, or the
    revert; an empty answer where outputs are expected means no code at the address."""
    if not success:
        return decode_revert(data)
    if not data and fn.outputs:
        return ChainCallReverted(f"{fn.name}: no contract code at the address")
    return fn.decode(data)


# Messages with which nodes report a call that failed in the EVM without reverting (an invalid
# opcode, out of gas, a bad jump): aggregate3 reports those as a failed call with no data.
_EVM_FAILURES = (
    "out of gas",
    "invalid opcode",
    "invalidfeopcode",
    "opcodenotfound",
    "invalid jump",
    "stack underflow",
    "stack overflow",
    "evm error",
)


class Gateway:
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
    ) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        self.w3 = w3
        self.multicall_address = to_checksum_address(multicall) if multicall else None
        self.batch_size = batch_size
        self._multicall_lock = threading.Lock()
        self._multicall_has_code: bool | None = None

    # transport ------------------------------------------------------------------------------

    def _check(self, response: Any, method: str) -> Any:
        if not isinstance(response, dict) or ("result" not in response and "error" not in response):
            raise ChainUnavailable(
                f"the node answered {method} with something that is not JSON-RPC"
            )
        if "error" in response and response["error"] is not None:
            error = response["error"]
            data = error.get("data") if isinstance(error, dict) else None
            if isinstance(data, dict):  # some nodes nest it
                data = data.get("data")
            message = str(error.get("message", "")) if isinstance(error, dict) else str(error)
            if (isinstance(data, str) and data.startswith("0x")) or "revert" in message.lower():
                raise decode_revert(data if isinstance(data, str) else None)
            if method == "eth_call" and any(f in message.lower() for f in _EVM_FAILURES):
                raise decode_revert(None)
            raise ChainUnavailable(f"the node refused {method}: {message[:200]}", refused=True)
        return response["result"]

    def request(self, method: str, params: list[Any]) -> Any:
        try:
            response = self.w3.provider.make_request(method, params)
        except ChainError:
            raise
        except (requests.RequestException, OSError, ValueError, TimeoutError) as exc:
            raise ChainUnavailable(f"the node could not be reached ({type(exc).__name__})") from exc
        return self._check(response, method)

    def batch(self, calls: Sequence[tuple[str, list[Any]]]) -> list[Any]:
        """JSON-RPC batches of at most `batch_size` requests; each item is its result or the
        ChainError it raised."""
        out: list[Any] = []
        for start in range(0, len(calls), self.batch_size):
            out += self._batch_chunk(calls[start : start + self.batch_size])
        return out

    def _batch_chunk(self, calls: Sequence[tuple[str, list[Any]]]) -> list[Any]:
        try:
            responses = self.w3.provider.make_batch_request(list(calls))
        except (requests.RequestException, OSError, ValueError, TimeoutError) as exc:
            raise ChainUnavailable(f"the node could not be reached ({type(exc).__name__})") from exc
        if not isinstance(responses, list) or len(responses) != len(calls):
            raise ChainUnavailable("the node answered a batch with something that is not a batch")
        out: list[Any] = []
        for response, (method, _) in zip(responses, calls, strict=True):
            try:
                out.append(self._check(response, method))
            except ChainError as exc:
                out.append(exc)
        return out

    # blocks ---------------------------------------------------------------------------------

    def chain_id(self) -> int:
        return int(self.request("eth_chainId", []), 16)

    def _block(self, raw: Any) -> Block:
        if not isinstance(raw, dict):
            raise ChainUnavailable("the node does not know that block")
        try:
            return Block(int(raw["number"], 16), raw["hash"], int(raw["timestamp"], 16))
        except (KeyError, TypeError, ValueError) as exc:
            raise ChainUnavailable("the node answered a malformed block") from exc

    def head(self, *, confirmations: int = 0) -> Block:
        number = int(self.request("eth_blockNumber", []), 16)
        return self.block(max(number - confirmations, 0))

    def block(self, number: int) -> Block:
        return self._block(self.request("eth_getBlockByNumber", [hex(number), False]))

    def block_or_none(self, number: int) -> Block | None:
        """The block, or None where the node has none at that height (a shorter chain)."""
        raw = self.request("eth_getBlockByNumber", [hex(number), False])
        return None if raw is None else self._block(raw)

    def blocks(self, numbers: Iterable[int], *, missing_ok: bool = False) -> dict[int, Block]:
        """Blocks by number in JSON-RPC batches; with missing_ok, absent ones are left out."""
        wanted = sorted(set(numbers))
        results = self.batch([("eth_getBlockByNumber", [hex(n), False]) for n in wanted])
        out = {}
        for number, raw in zip(wanted, results, strict=True):
            if isinstance(raw, Exception):
                raise raw
            if raw is None and missing_ok:
                continue
            out[number] = self._block(raw)
        return out

    def code_at(self, address: str, *, block: int | str = "latest") -> bytes:
        raw = self.request(
            "eth_getCode", [address, block if isinstance(block, str) else hex(block)]
        )
        return bytes.fromhex(str(raw).removeprefix("0x"))

    # calls ----------------------------------------------------------------------------------

    def call(self, to: str, data: bytes, *, block: int, sender: str | None = None) -> bytes:
        tx: dict[str, str] = {"to": to, "data": "0x" + data.hex()}
        if sender:
            tx["from"] = sender
        return _hex_bytes(self.request("eth_call", [tx, hex(block)]), "eth_call")

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

    def multicall(
        self, calls: Sequence[tuple[str, Function, tuple]], *, block: int
    ) -> list[tuple | ChainCallReverted]:
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
        self, calls: Sequence[tuple[str, Function, tuple]], *, block: int
    ) -> list[tuple | ChainCallReverted] | None:
        """The calls through aggregate3; None where Multicall3 has no code at that block (one
        older than its deployment, or a node that lost it since it was asked)."""
        aggregate3 = function("Multicall3", "aggregate3")
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

    def _plain_calls(
        self, calls: Sequence[tuple[str, Function, tuple]], *, block: int
    ) -> list[tuple | ChainCallReverted]:
        """The calls as plain eth_calls in JSON-RPC batches: needs no helper on the chain."""
        answers = self.batch(
            [
                ("eth_call", [{"to": to, "data": "0x" + fn.encode(*args).hex()}, hex(block)])
                for to, fn, args in calls
            ]
        )
        out: list[tuple | ChainCallReverted] = []
        for answer, (_, fn, _) in zip(answers, calls, strict=True):
            if isinstance(answer, ChainCallReverted):
                out.append(answer)
            elif isinstance(answer, ChainError):
                raise answer
            else:
                out.append(_outcome(fn, True, _hex_bytes(answer, "eth_call")))
        return out

    def _strict(self, calls, *, block: int) -> list[tuple]:
        results = self.multicall(calls, block=block)
        for result in results:
            if isinstance(result, ChainCallReverted):
                raise result
        return results  # type: ignore[return-value]

    # LAT state ------------------------------------------------------------------------------

    def read_lat(self, *, proxy: str, manager: str, coordinator: str, block: Block) -> LatState:
        lt = "LiquidToken"
        first = self._strict(
            [
                (proxy, function(lt, "name"), ()),
                (proxy, function(lt, "symbol"), ()),
                (proxy, function(lt, "totalAssets"), ()),
                (proxy, function(lt, "totalSupply"), ()),
                (proxy, function(lt, "paused"), ()),
                (manager, function("LiquidTokenManager", "getSupportedTokens"), ()),
                (coordinator, function("StakerNodeCoordinator", "maxNodes"), ()),
                (coordinator, function("StakerNodeCoordinator", "getAllNodes"), ()),
            ],
            block=block.number,
        )
        name, symbol, total_assets, total_supply, paused, tokens, max_nodes, nodes = (
            r[0] for r in first
        )
        tokens = [to_checksum_address(t) for t in tokens]
        calls: list[tuple[str, Function, tuple]] = []
        for token in tokens:
            calls += [
                (manager, function("LiquidTokenManager", "getTokenInfo"), (token,)),
                (manager, function("LiquidTokenManager", "getTokenStrategy"), (token,)),
                (token, function("TestERC20", "symbol"), ()),
                (token, function("TestERC20", "name"), ()),
            ]
        calls += [
            (proxy, function(lt, "balanceAssets"), (tokens,)),
            (proxy, function(lt, "balanceQueuedAssets"), (tokens,)),
        ]
        second = self.multicall(calls, block=block.number)
        balances, queued = second[-2], second[-1]
        for result in (balances, queued):
            if isinstance(result, ChainCallReverted):
                raise result
        states = []
        for i, token in enumerate(tokens):
            info, strategy, token_symbol, token_name = second[4 * i : 4 * i + 4]
            for result in (info, strategy):
                if isinstance(result, ChainCallReverted):
                    raise result
            decimals, price, threshold = info
            states.append(
                TokenState(
                    address=token,
                    # symbol() and name() are ERC-20's optional metadata: blank where absent.
                    symbol="" if isinstance(token_symbol, ChainCallReverted) else token_symbol[0],
                    name="" if isinstance(token_name, ChainCallReverted) else token_name[0],
                    decimals=int(decimals),
                    price_per_unit=int(price),
                    volatility_threshold=int(threshold),
                    strategy=to_checksum_address(strategy[0]),
                    balance=int(balances[0][i]),
                    queued_balance=int(queued[0][i]),
                )
            )
        return LatState(
            block=block,
            name=name,
            symbol=symbol,
            total_assets=int(total_assets),
            total_supply=int(total_supply),
            paused=bool(paused),
            max_nodes=int(max_nodes),
            tokens=tuple(states),
            nodes=tuple(to_checksum_address(n) for n in nodes),
        )

    def read_nodes(
        self,
        *,
        nodes: Sequence[str],
        strategies: Sequence[tuple[str, str]],
        delegation_manager: str,
        block: Block,
    ) -> list[NodeState]:
        """Delegation and withdrawable shares of each node, in each (token, strategy)."""
        strategy_addresses = [s for _, s in strategies]
        calls: list[tuple[str, Function, tuple]] = []
        for node in nodes:
            calls += [
                (node, function("StakerNode", "getId"), ()),
                (node, function("StakerNode", "getOperatorDelegation"), ()),
                (
                    delegation_manager,
                    function("DelegationManager", "getWithdrawableShares"),
                    (node, strategy_addresses),
                ),
            ]
        first = self._strict(calls, block=block.number)
        conversions: list[tuple[str, Function, tuple]] = []
        positions: list[tuple[int, int]] = []
        for n in range(len(nodes)):
            withdrawable = first[3 * n + 2][0]
            for s, (_, strategy) in enumerate(strategies):
                shares = int(withdrawable[s])
                if shares and strategy.lower() != BEACON_CHAIN_STRATEGY.lower():
                    conversions.append(
                        (strategy, function("Strategy", "sharesToUnderlyingView"), (shares,))
                    )
                    positions.append((n, s))
        converted = dict(
            zip(
                positions,
                (r[0] for r in self._strict(conversions, block=block.number)),
                strict=True,
            )
        )
        out = []
        for n, node in enumerate(nodes):
            node_id, operator, (withdrawable, _deposited) = (
                first[3 * n][0],
                first[3 * n + 1][0],
                first[3 * n + 2],
            )
            assets = []
            for s, (token, strategy) in enumerate(strategies):
                shares = int(withdrawable[s])
                if not shares:
                    continue
                staked = converted.get((n, s), shares)  # beacon-chain shares count 1:1
                assets.append(NodeAssetState(token, strategy, shares, int(staked)))
            out.append(
                NodeState(
                    address=node,
                    node_id=int(node_id),
                    operator=to_checksum_address(operator),
                    assets=tuple(assets),
                )
            )
        return out

    def operator_splits(
        self, *, rewards_coordinator: str, pairs: Sequence[tuple[str, str]], block: Block
    ) -> dict[tuple[str, str], int]:
        fn = function("RewardsCoordinator", "getOperatorAVSSplit")
        results = self._strict(
            [(rewards_coordinator, fn, (op, avs)) for op, avs in pairs], block=block.number
        )
        return {pair: int(r[0]) for pair, r in zip(pairs, results, strict=True)}

    def price_feed(self, *, feed: str, block: Block) -> tuple[int, int]:
        """(answer, decimals) of a Chainlink-style feed."""
        answer, decimals = self._strict(
            [
                (feed, function("PriceFeed", "latestRoundData"), ()),
                (feed, function("PriceFeed", "decimals"), ()),
            ],
            block=block.number,
        )
        return max(int(answer[1]), 0), int(decimals[0])

    # logs -----------------------------------------------------------------------------------

    def logs(
        self, *, address: str | list[str], topics: list[Any], from_block: int, to_block: int
    ) -> list[dict[str, Any]]:
        result = self.request(
            "eth_getLogs",
            [
                {
                    "address": address,
                    "topics": topics,
                    "fromBlock": hex(from_block),
                    "toBlock": hex(to_block),
                }
            ],
        )
        if not isinstance(result, list):
            raise ChainUnavailable(
                "the node answered eth_getLogs with something that is not a list"
            )
        return result

    def deposit_logs(self, *, lat: str, from_block: int, to_block: int) -> list[DepositLog]:
        """Both deposit events of a LAT, decoded by hand: a backfill decodes hundreds of
        thousands, and their layout is fixed (three indexed addresses, two uint256), so this
        skips `event_logs`' generic eth_abi decoding."""
        new, legacy = event("LiquidToken", "AssetDeposited"), event("LiquidToken", "Deposit")
        kinds = {new.topic: new.name, legacy.topic: legacy.name}
        raw_logs = self.logs(
            address=lat,
            topics=[[new.topic, legacy.topic]],
            from_block=from_block,
            to_block=to_block,
        )
        out = []
        try:
            for log in raw_logs:
                if log.get("removed"):
                    continue
                topics = log["topics"]
                data = bytes.fromhex(log["data"][2:])
                out.append(
                    DepositLog(
                        kind=kinds[topics[0]],
                        tx_hash=log["transactionHash"],
                        log_index=int(log["logIndex"], 16),
                        block_number=int(log["blockNumber"], 16),
                        block_hash=log["blockHash"],
                        sender=_address_topic(topics[1]),
                        receiver=_address_topic(topics[2]),
                        asset=_address_topic(topics[3]),
                        amount=int.from_bytes(data[:32], "big"),
                        shares=int.from_bytes(data[32:64], "big"),
                        block_timestamp=int(log["blockTimestamp"], 16)
                        if log.get("blockTimestamp")
                        else None,
                    )
                )
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            raise ChainUnavailable("the node answered malformed deposit logs") from exc
        return out

    def event_logs(
        self,
        *,
        contract: str,
        name: str,
        address: str,
        from_block: int,
        to_block: int,
        topics: list[Any] | None = None,
    ) -> list[LogRef]:
        """Logs of one event, decoded (indexed values first, then data values)."""
        ev = event(contract, name)
        raw_logs = self.logs(
            address=address,
            topics=[ev.topic, *(topics or [])],
            from_block=from_block,
            to_block=to_block,
        )
        out = []
        try:
            for log in raw_logs:
                if log.get("removed"):
                    continue
                indexed = tuple(
                    abi_decode([kind], bytes.fromhex(topic[2:]))[0]
                    for kind, topic in zip(ev.indexed, log["topics"][1:], strict=True)
                )
                data = tuple(abi_decode(ev.data, bytes.fromhex(log["data"][2:])))
                out.append(
                    LogRef(
                        block_number=int(log["blockNumber"], 16),
                        block_hash=log["blockHash"],
                        tx_hash=log["transactionHash"],
                        log_index=int(log["logIndex"], 16),
                        address=to_checksum_address(log["address"]),
                        values=indexed + data,
                    )
                )
        except Exception as exc:
            raise ChainUnavailable(f"the node answered malformed {name} logs") from exc
        return out

    # deposits -------------------------------------------------------------------------------

    @staticmethod
    def deposit_calldata(*, assets: Sequence[str], amounts: Sequence[int], receiver: str) -> str:
        fn = function("LiquidToken", "deposit")
        return "0x" + fn.encode(list(assets), list(amounts), receiver).hex()

    def simulate_deposit(self, *, lat: str, calldata: str, sender: str) -> Simulation:
        """eth_call, eth_estimateGas and eth_gasPrice in one JSON-RPC batch, at the latest block.

        A revert of either call is a `Simulation` with `success=False` and the decoded reason;
        only a node that cannot be reached or answers garbage raises (`ChainUnavailable`).
        """
        tx = {"from": sender, "to": lat, "data": calldata, "value": "0x0"}
        call, gas, price = self.batch(
            [
                ("eth_call", [tx, "latest"]),
                ("eth_estimateGas", [tx, "latest"]),
                ("eth_gasPrice", []),
            ]
        )
        for result in (call, gas, price):
            if isinstance(result, ChainUnavailable):
                raise result
        try:
            gas_price = int(price, 16)
        except (TypeError, ValueError) as exc:
            raise ChainUnavailable("the node answered eth_gasPrice with garbage") from exc
        for result in (call, gas):
            if isinstance(result, ChainCallReverted):
                return Simulation(
                    success=False, shares=(), reason=result.reason, gas=GasQuote(0, gas_price)
                )
        if call == "0x":  # a call to an address without code "succeeds" with nothing
            return Simulation(
                success=False,
                shares=(),
                reason="no contract code at the LAT address",
                gas=GasQuote(0, gas_price),
            )
        try:
            (shares,) = function("LiquidToken", "deposit").decode(bytes.fromhex(call[2:]))
            quote = GasQuote(gas_limit=int(gas, 16), gas_price=gas_price)
        except (TypeError, ValueError) as exc:
            raise ChainUnavailable("the node answered the simulation with garbage") from exc
        return Simulation(success=True, shares=tuple(int(s) for s in shares), reason="", gas=quote)


def scan_ranges(
    fetch: Callable[[int, int], T], *, start: int, end: int, max_range: int
) -> Iterator[tuple[int, int, T]]:
    """`fetch(first, last)` over the blocks start..end in ranges of at most `max_range`, as
    (first, last, result). A range the node refuses is halved until it is accepted (a node that
    cannot be reached is not retried here); after each success the range grows back."""
    span = max_range
    while start <= end:
        last = min(start + span - 1, end)
        try:
            result = fetch(start, last)
        except ChainUnavailable as exc:
            if not exc.refused or span == 1:
                raise
            span = max(span // 2, 1)
            continue
        yield start, last, result
        start = last + 1
        span = min(span * 2, max_range)


# --- one Web3 per process and chain ---------------------------------------------------------

_lock = threading.Lock()
_gateways: dict[tuple[str, float, str, int], Gateway] = {}


def gateway_for_url(
    url: str,
    *,
    timeout: float,
    multicall: str | None = MULTICALL3_ADDRESS,
    batch_size: int = DEFAULT_BATCH_SIZE,
) -> Gateway:
    """The process's gateway to the node at `url` (one per URL and options)."""
    key = (url, timeout, multicall or "", batch_size)
    with _lock:
        gateway = _gateways.get(key)
        if gateway is None:
            # The proxy settings of the environment are read once here, not on every request
            # (requests does that when trust_env is on: half a millisecond per call).
            session = requests.Session()
            session.trust_env = False
            session.proxies = requests.utils.get_environ_proxies(url)
            provider = HTTPProvider(
                url,
                request_kwargs={"timeout": timeout},
                session=session,
                exception_retry_configuration=None,  # the jobs retry; web3 never does
            )
            gateway = Gateway(Web3(provider), multicall=multicall, batch_size=batch_size)
            _gateways[key] = gateway
        return gateway


def rpc_url_for(chain_id: int, *, urls: dict[int, str], default: str) -> str:
    url = urls.get(chain_id) or default
    if not url:
        raise ChainUnavailable(f"no node is configured for chain {chain_id} (RPC_URL_{chain_id})")
    return url


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
    )
