"""The chain gateway's reads: the runtime client of a node.

Every read takes a block number so that one refresh sees one state; reads are batched: through
Multicall3 `aggregate3` where the configured address holds code (asked once per gateway), else as
JSON-RPC batches of plain `eth_call`s, chunked at `batch_size` requests, with the same typed
results at the same block. Calls are encoded and decoded by `abi`, sent by `transport`, and
returned as the frozen dataclasses of `results`. Nothing here touches the ORM or Django's
settings (only `gateway_for` reads them).
"""

from __future__ import annotations

import contextlib
import functools
import queue
import threading
from collections.abc import Callable, Collection, Generator, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from eth_utils import to_checksum_address

from chain import depositcall, reverts
from chain.abi import Function, decode_revert, event, function
from chain.activity import ActivityLog, activity_decoder, activity_topics
from chain.deadline import DeadlineClient
from chain.errors import ChainCallReverted, ChainError, ChainUnavailable
from chain.results import (
    Block,
    GasQuote,
    LatState,
    LogRef,
    NodeAssetState,
    NodeState,
    Simulation,
    TokenState,
)
from chain.transport import DEFAULT_BATCH_SIZE, Transport, hex_bytes, http_web3, rpc_url_for
from core.addresses import is_beacon_chain_eth
from core.telemetry import UNKNOWN_CHAIN

if TYPE_CHECKING:
    from web3 import Web3

MULTICALL3_ADDRESS = "0xcA11bde05977b3631167028862bE2a173976CA11"
EIP1967_IMPLEMENTATION_SLOT = 0x360894A13BA1A3210667C828492DB98DCA3E2076CC3735A920A3CA505D382BBC

# The views chain.md names that older deployments lack (its "Older deployments"), by the name
# the service records them under: tags up to v1.0.2 (and Holesky v1) have no
# LiquidToken.tokenRegistryOracle() and an oracle without arePricesStale() and
# lastPriceUpdate(). The state read calls no other view that some deployment lacks: the
# LiquidTokenManager's getDepositAssetBalance/getWithdrawableAssetBalance (getStakedAssetBalance
# up to v1.0.6) are not read, the nodes' stakes come from the DelegationManager and strategies.
LT_ORACLE = "LiquidToken.tokenRegistryOracle()"
ORACLE_STALE = "TokenRegistryOracle.arePricesStale()"
ORACLE_LAST_UPDATE = "TokenRegistryOracle.lastPriceUpdate()"
OPTIONAL_FUNCTIONS = {
    LT_ORACLE: ("LiquidToken", "tokenRegistryOracle"),
    ORACLE_STALE: ("TokenRegistryOracle", "arePricesStale"),
    ORACLE_LAST_UPDATE: ("TokenRegistryOracle", "lastPriceUpdate"),
}


def optional_function(name: str) -> Function:
    """The Function of an `OPTIONAL_FUNCTIONS` name."""
    return function(*OPTIONAL_FUNCTIONS[name])


T = TypeVar("T")

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


def _decoded(
    raw_logs: Iterable[dict[str, Any]], decode: Callable[[dict[str, Any]], T], what: str
) -> list[T]:
    """Decode each log the node did not mark removed; a malformed answer is the node's fault."""
    try:
        return [decode(log) for log in raw_logs if not log.get("removed")]
    except Exception as exc:
        raise ChainUnavailable(f"the node answered malformed {what}") from exc


class LogWindow:
    """Raw logs of some addresses over a block range, read once and handed out in parts
    (Gateway.shared_logs)."""

    def __init__(
        self,
        addresses: frozenset[str],
        topics: list[Any],
        first: int,
        last: int,
        logs: list[dict[str, Any]],
    ) -> None:
        self.addresses, self.topics, self.first, self.last = addresses, topics, first, last
        self.logs = logs
        self.served: set[frozenset[str]] = set()
        self.lock = threading.Lock()

    def take(
        self, address: str | list[str], topics: list[Any], from_block: int, to_block: int
    ) -> list[dict[str, Any]] | None:
        """The logs of a read this window answers, or None for the node to answer it."""
        wanted = frozenset(a.lower() for a in ([address] if isinstance(address, str) else address))
        if topics != self.topics or not (self.first <= from_block <= to_block <= self.last):
            return None
        with self.lock:
            if not wanted <= self.addresses or wanted in self.served:
                return None
            self.served.add(wanted)
        return [
            log
            for log in self.logs
            if log["address"].lower() in wanted
            and from_block <= int(log["blockNumber"], 16) <= to_block
        ]


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
        chain: str = UNKNOWN_CHAIN,
    ) -> None:
        self.transport = Transport(w3, batch_size=batch_size, chain=chain)
        self.multicall_address = to_checksum_address(multicall) if multicall else None
        self._multicall_lock = threading.Lock()
        self._multicall_has_code: bool | None = None
        self._window: LogWindow | None = None
        self._beacons: dict[str, str] = {}  # coordinator (lower case): its node beacon

    @property
    def w3(self) -> Web3:
        return self.transport.w3

    @property
    def batch_size(self) -> int:
        return self.transport.batch_size

    # blocks ---------------------------------------------------------------------------------

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

    # calls ----------------------------------------------------------------------------------

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

    # LAT state ------------------------------------------------------------------------------

    def read_lat(
        self,
        *,
        proxy: str,
        manager: str,
        coordinator: str,
        block: Block,
        oracle: str | None = None,
        missing: Collection[str] = frozenset(),
    ) -> LatState:
        """The LAT, its manager's tokens and its coordinator's nodes at the block, in two
        batches. `missing` names the optional functions (`OPTIONAL_FUNCTIONS`) the deployment
        lacks (lats/functions.py detects them): they are not called and what they feed is
        None. `oracle` is the price oracle whose views `missing` speaks of: the LAT's
        `tokenRegistryOracle()` where it has the view, else the manifest's. Where the LAT names
        another, its views are not read here (staleness and last update None, `oracle` the one
        named: the caller detects its functions and calls `read_oracle`); with `oracle` None,
        those of the oracle the LAT names are read. A function called here that reverts fails
        the read, as any other."""
        with_oracle_view = LT_ORACLE not in missing
        first = [r[0] for r in self._strict(
            _lat_calls(proxy, manager, coordinator, with_oracle=with_oracle_view),
            block=block.number,
        )]  # fmt: skip
        name, symbol, total_assets, total_supply, paused, tokens, max_nodes, nodes = first[:8]
        detected_for = oracle
        oracle = oracle or ""
        if with_oracle_view:
            oracle = to_checksum_address(first[8])
        if detected_for is None:
            detected_for = oracle
        tokens = [to_checksum_address(t) for t in tokens]
        # Views of an oracle other than the one `missing` was detected for are left to the
        # caller (read_oracle, once it has detected that one's).
        same = bool(oracle) and detected_for.lower() == oracle.lower()
        oracle_calls = _oracle_calls(oracle, missing) if same else []
        answers = self.multicall(
            _token_calls(proxy, manager, tokens) + oracle_calls, block=block.number
        )
        token_answers = answers[: len(answers) - len(oracle_calls)]
        stale, last_update = _oracle_values(oracle_calls, answers[len(token_answers) :])
        return LatState(
            block=block,
            name=name,
            symbol=symbol,
            total_assets=int(total_assets),
            total_supply=int(total_supply),
            paused=bool(paused),
            max_nodes=int(max_nodes),
            tokens=_token_states(tokens, token_answers),
            nodes=tuple(to_checksum_address(n) for n in nodes),
            prices_stale=stale,
            last_price_update=last_update,
            oracle=oracle,
        )

    def read_oracle(
        self, *, oracle: str, block: Block, missing: Collection[str] = frozenset()
    ) -> tuple[bool | None, int | None]:
        """The oracle's `arePricesStale()` and `lastPriceUpdate()` at the block (None for those
        `missing` names, or without an oracle)."""
        calls = _oracle_calls(oracle, missing)
        return _oracle_values(calls, self._strict(calls, block=block.number) if calls else [])

    # optional functions ---------------------------------------------------------------------

    def implementations(self, proxies: Sequence[str], *, block: Block) -> dict[str, str]:
        """Each address's implementation from its EIP-1967 slot (one JSON-RPC batch of
        eth_getStorageAt); an address whose slot is empty (not such a proxy) is its own."""
        wanted = list(dict.fromkeys(to_checksum_address(p) for p in proxies))
        answers = self.transport.batch(
            [
                ("eth_getStorageAt", [p, hex(EIP1967_IMPLEMENTATION_SLOT), hex(block.number)])
                for p in wanted
            ]
        )
        out: dict[str, str] = {}
        for proxy, answer in zip(wanted, answers, strict=True):
            if isinstance(answer, Exception):
                raise answer
            word = int.from_bytes(hex_bytes(answer, "eth_getStorageAt"), "big")
            out[proxy] = to_checksum_address(f"0x{word:040x}") if word else proxy
        return out

    def missing_functions(
        self, *, address: str, implementation: str, names: Sequence[str], block: Block
    ) -> set[str]:
        """Which of the views `names` (`OPTIONAL_FUNCTIONS` keys, all of one contract at
        `address`) the contract lacks, each called alone at the block with a plain eth_call
        (never through Multicall3, whose answer for a failed call carries no node message),
        beside the implementation's code, in one JSON-RPC batch.

        A view is missing where its call reverts without data (what a Solidity contract
        without the selector and without a fallback answers, through a proxy too) or answers
        nothing (no code at `address`), and the implementation's dispatcher does not compare
        the selector (`_dispatches`).
        An empty revert of a view whose selector is in the code is a real failure (out of
        gas, a bare `require`, a call into no code inside the view): it is raised, and
        nothing is remembered. A revert with data means the function is there."""
        fns = [optional_function(name) for name in names]
        calls: list[tuple[str, list[Any]]] = [
            ("eth_call", [{"to": address, "data": "0x" + fn.encode().hex()}, hex(block.number)])
            for fn in fns
        ]
        calls.append(("eth_getCode", [implementation, hex(block.number)]))
        *answers, code_answer = self.transport.batch(calls)
        if isinstance(code_answer, Exception):
            raise code_answer
        code = hex_bytes(code_answer, "eth_getCode")
        missing = set()
        for name, fn, answer in zip(names, fns, answers, strict=True):
            if isinstance(answer, ChainCallReverted):
                if answer.revert is not None and answer.revert.kind != reverts.EMPTY:
                    continue  # it exists, and reverted with a reason
            elif isinstance(answer, Exception):
                raise answer
            elif hex_bytes(answer, "eth_call"):
                continue  # it answered
            if _dispatches(code, fn.selector):
                raise ChainCallReverted(
                    f"{name} reverted without data although {implementation} has it"
                )
            missing.add(name)
        return missing

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
        first = self._strict(
            _node_calls(nodes, strategy_addresses, delegation_manager), block=block.number
        )
        answers = [first[3 * n : 3 * n + 3] for n in range(len(nodes))]
        staked = self._staked_amounts(
            [withdrawable[0] for _, _, withdrawable in answers], strategies, block=block
        )
        return [
            _node_state(node, answers[n], strategies, staked[n]) for n, node in enumerate(nodes)
        ]

    def _staked_amounts(
        self,
        withdrawable: Sequence[Sequence[int]],
        strategies: Sequence[tuple[str, str]],
        *,
        block: Block,
    ) -> list[dict[int, int]]:
        """Per node, the underlying amounts of its shares by strategy index, converted by each
        strategy at the block; strategies where it has no shares, and the beacon chain's (whose
        shares count 1:1), are left out."""
        conversions: list[Call] = []
        positions: list[tuple[int, int]] = []
        for n, shares_by_strategy in enumerate(withdrawable):
            for s, (_, strategy) in enumerate(strategies):
                shares = int(shares_by_strategy[s])
                if shares and not is_beacon_chain_eth(strategy):
                    conversions.append(
                        (strategy, function("Strategy", "sharesToUnderlyingView"), (shares,))
                    )
                    positions.append((n, s))
        converted = (r[0] for r in self._strict(conversions, block=block.number))
        staked: list[dict[int, int]] = [{} for _ in withdrawable]
        for (n, s), amount in zip(positions, converted, strict=True):
            staked[n][s] = amount
        return staked

    def manager_core_contracts(self, *, manager: str, block: Block) -> dict[str, str]:
        """The EigenLayer DelegationManager and StrategyManager a LiquidTokenManager names
        (`delegationManager()`, `strategyManager()`), by their manifest names; one that
        reverts (a deployment without the view) or answers the zero address is left out."""
        names = ("delegationManager", "strategyManager")
        answers = self.multicall(
            [(manager, function("LiquidTokenManager", name), ()) for name in names],
            block=block.number,
        )
        found: dict[str, str] = {}
        for name, answer in zip(names, answers, strict=True):
            address = _optional(answer)
            if address is not None and int(address, 16) != 0:
                found[name] = to_checksum_address(address)
        return found

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

    @contextlib.contextmanager
    def shared_logs(
        self, *, addresses: Iterable[str], topics: list[Any], from_block: int, to_block: int
    ) -> Iterator[None]:
        """Within the block, `logs` answers a read of some of `addresses` with these `topics`
        inside from_block..to_block from one eth_getLogs over all of them, made here: one
        round trip for every LAT of a chain. Each set of addresses is answered from it once; a
        second read of the same set (a retry after logs and headers disagreed) and any other
        read go to the node."""
        addresses = list(addresses)
        raw = self._get_logs(addresses, topics, from_block, to_block)
        self._window = LogWindow(
            frozenset(a.lower() for a in addresses), topics, from_block, to_block, raw
        )
        try:
            yield
        finally:
            self._window = None

    def logs(
        self, *, address: str | list[str], topics: list[Any], from_block: int, to_block: int
    ) -> list[dict[str, Any]]:
        window = self._window
        if window is not None:
            shared = window.take(address, topics, from_block, to_block)
            if shared is not None:
                return shared
        return self._get_logs(address, topics, from_block, to_block)

    def _get_logs(
        self, address: str | list[str], topics: list[Any], from_block: int, to_block: int
    ) -> list[dict[str, Any]]:
        result = self.transport.request(
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

    def activity_logs(
        self,
        *,
        proxy: str,
        manager: str,
        coordinator: str,
        oracle: str = "",
        beacon: str = "",
        nodes: dict[str, int] | None = None,
        from_block: int,
        to_block: int,
    ) -> list[ActivityLog]:
        """Every event of extensions.md's table from the LAT's contracts (its proxies, the
        node `beacon` and the staker `nodes` {address: id}), in one eth_getLogs, in chain
        order; logs of other events or contracts are left out.

        A node created in the range (`NodeCreated`) or a beacon registered in it
        (`NodeImplementationChanged`) emits in the range too: their logs are read by one more
        eth_getLogs over those addresses only, from the block that made them. `nodes` gains
        the nodes created (the caller's next range reads them with the others)."""
        nodes = {} if nodes is None else nodes
        contracts = {
            "LiquidToken": proxy,
            "LiquidTokenManager": manager,
            "StakerNodeCoordinator": coordinator,
            "TokenRegistryOracle": oracle,
        }
        addresses = [a for a in (proxy, manager, coordinator, oracle, beacon) if a]
        raw_logs = self.logs(
            address=[*addresses, *nodes],
            topics=[activity_topics()],
            from_block=from_block,
            to_block=to_block,
        )
        decode = activity_decoder(contracts, nodes=nodes, beacon=beacon)
        logs = [log for log in _decoded(raw_logs, decode, "event logs") if log is not None]
        known = {a.lower() for a in [*addresses, *nodes]}
        found: dict[str, int] = {}  # address: the block it was made in
        created: dict[str, int] = {}
        new_beacon = ""
        for log in logs:
            if log.type == "nodeCreated" and log.args["node"].lower() not in known:
                created[log.args["node"]] = log.args["nodeId"]
                found.setdefault(log.args["node"], log.block_number)
            elif log.type == "nodeImplementationChanged" and not beacon:
                new_beacon = log.args["beacon"]
                found.setdefault(new_beacon, log.block_number)
        if found:
            more = self.logs(
                address=list(found),
                topics=[activity_topics()],
                from_block=min(found.values()),
                to_block=to_block,
            )
            decode = activity_decoder({}, nodes=created, beacon=new_beacon)
            logs += [log for log in _decoded(more, decode, "event logs") if log is not None]
        nodes.update(created)
        return sorted(logs, key=lambda log: log.key)

    def node_beacon(self, coordinator: str, *, block: int) -> str:
        """The coordinator's staker node beacon (`upgradeableBeacon()`) at `block`, "" when it
        has none yet or no such function; remembered once known (upstream upgrades the beacon
        it registered first, never replaces it)."""
        known = self._beacons.get(coordinator.lower())
        if known:
            return known
        fn = function("StakerNodeCoordinator", "upgradeableBeacon")
        try:
            data = self.call(coordinator, fn.encode(), block=block)
            (beacon,) = fn.decode(data)
        except (ChainCallReverted, ChainUnavailable):
            return ""
        if int(beacon, 16) == 0:
            return ""
        beacon = to_checksum_address(beacon)
        self._beacons[coordinator.lower()] = beacon
        return beacon

    def event_logs(
        self,
        *,
        contract: str,
        name: str,
        address: str | list[str],
        from_block: int,
        to_block: int,
        topics: list[Any] | None = None,
    ) -> list[LogRef]:
        """Logs of one event, decoded (indexed values first, then data values); `address`
        may list several contracts emitting the same event."""
        ev = event(contract, name)
        raw_logs = self.logs(
            address=address,
            topics=[ev.topic, *(topics or [])],
            from_block=from_block,
            to_block=to_block,
        )

        def decode(log: dict[str, Any]) -> LogRef:
            return LogRef(
                block_number=int(log["blockNumber"], 16),
                block_hash=log["blockHash"],
                tx_hash=log["transactionHash"],
                log_index=int(log["logIndex"], 16),
                address=to_checksum_address(log["address"]),
                values=ev.decode(log["topics"][1:], log["data"]),
            )

        return _decoded(raw_logs, decode, f"{name} logs")

    # deposits -------------------------------------------------------------------------------

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


def _dispatches(code: bytes, selector: bytes) -> bool:
    """Whether the code compares a call's selector with `selector` as Solidity's dispatcher
    does: `PUSH4 selector EQ` (legacy and via-IR code alike). The selector alone is not
    enough: code that calls the function on another contract holds it too (`PUSH4 selector
    PUSH1 0xe0 SHL`), as Mainnet v1's LiquidToken holds its oracle's `arePricesStale()`."""
    return b"\x63" + selector + b"\x14" in code


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


# --- the calls of read_lat and read_nodes, and their answers as results -----------------------


def _lat_calls(proxy: str, manager: str, coordinator: str, *, with_oracle: bool) -> list[Call]:
    """name, symbol, totalAssets, totalSupply, paused, supported tokens, maxNodes, nodes,
    and the price oracle where the LAT has the view."""
    lt = "LiquidToken"
    calls: list[Call] = [
        (proxy, function(lt, "name"), ()),
        (proxy, function(lt, "symbol"), ()),
        (proxy, function(lt, "totalAssets"), ()),
        (proxy, function(lt, "totalSupply"), ()),
        (proxy, function(lt, "paused"), ()),
        (manager, function("LiquidTokenManager", "getSupportedTokens"), ()),
        (coordinator, function("StakerNodeCoordinator", "maxNodes"), ()),
        (coordinator, function("StakerNodeCoordinator", "getAllNodes"), ()),
    ]
    if with_oracle:
        calls.append((proxy, function(lt, "tokenRegistryOracle"), ()))
    return calls


def _token_states(
    tokens: Sequence[str], answers: Sequence[tuple | ChainCallReverted]
) -> tuple[TokenState, ...]:
    """Each supported token's configuration, metadata and balances in the LAT, from the
    answers to `_token_calls`."""
    balances, queued = _required(answers[-2]), _required(answers[-1])
    return tuple(
        _token_state(token, answers[4 * i : 4 * i + 4], balances[0][i], queued[0][i])
        for i, token in enumerate(tokens)
    )


def _oracle_calls(oracle: str, missing: Collection[str]) -> list[Call]:
    """The price oracle's staleness and last update, those the deployment has (none without
    an oracle)."""
    if not oracle or int(oracle, 16) == 0:
        return []
    return [
        (oracle, optional_function(name), ())
        for name in (ORACLE_STALE, ORACLE_LAST_UPDATE)
        if name not in missing
    ]


def _oracle_values(
    calls: Sequence[Call], answers: Sequence[tuple | ChainCallReverted]
) -> tuple[bool | None, int | None]:
    """(arePricesStale, lastPriceUpdate) from the answers to `_oracle_calls`; None for a view
    not called. A revert of one called is raised: the deployment has it (lats/functions.py),
    so its failure is real."""
    values: dict[str, Any] = {}
    for (_, fn, _), answer in zip(calls, answers, strict=True):
        values[fn.name] = _required(answer)[0]
    stale, last = values.get("arePricesStale"), values.get("lastPriceUpdate")
    return (None if stale is None else bool(stale)), (None if last is None else int(last))


def _flat(values: tuple) -> tuple:
    """The members of a function's one struct output, or its outputs as they are."""
    return tuple(values[0]) if len(values) == 1 and isinstance(values[0], tuple) else values


def _optional(result: tuple | ChainCallReverted) -> Any:
    """A one-value call's value, or None where it reverted."""
    return None if isinstance(result, ChainCallReverted) else result[0]


def _token_calls(proxy: str, manager: str, tokens: Sequence[str]) -> list[Call]:
    """Four calls per token (info, strategy, symbol, name), then the LAT's two balance lists."""
    calls: list[Call] = []
    for token in tokens:
        calls += [
            (manager, function("LiquidTokenManager", "getTokenInfo"), (token,)),
            (manager, function("LiquidTokenManager", "getTokenStrategy"), (token,)),
            (token, function("TestERC20", "symbol"), ()),
            (token, function("TestERC20", "name"), ()),
        ]
    lt = "LiquidToken"
    calls += [
        (proxy, function(lt, "balanceAssets"), (tokens,)),
        (proxy, function(lt, "balanceQueuedAssets"), (tokens,)),
    ]
    return calls


def _token_state(
    token: str, answers: Sequence[tuple | ChainCallReverted], balance: int, queued: int
) -> TokenState:
    info, strategy, token_symbol, token_name = answers
    # getTokenInfo returns a TokenInfo struct: one static tuple in the ABI, the same three
    # words on the wire as three separate outputs.
    (decimals, price, threshold), strategy = _flat(_required(info)), _required(strategy)
    return TokenState(
        address=token,
        # symbol() and name() are ERC-20's optional metadata: blank where absent.
        symbol="" if isinstance(token_symbol, ChainCallReverted) else token_symbol[0],
        name="" if isinstance(token_name, ChainCallReverted) else token_name[0],
        decimals=int(decimals),
        price_per_unit=int(price),
        volatility_threshold=int(threshold),
        strategy=to_checksum_address(strategy[0]),
        balance=int(balance),
        queued_balance=int(queued),
    )


def _node_calls(
    nodes: Sequence[str], strategy_addresses: list[str], delegation_manager: str
) -> list[Call]:
    """Three calls per node: its id, its operator, its withdrawable shares in the strategies."""
    calls: list[Call] = []
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
    return calls


def _node_state(
    node: str,
    answers: Sequence[tuple],
    strategies: Sequence[tuple[str, str]],
    staked: dict[int, int],
) -> NodeState:
    node_id, operator, (withdrawable, _deposited) = answers[0][0], answers[1][0], answers[2]
    assets = []
    for s, (token, strategy) in enumerate(strategies):
        shares = int(withdrawable[s])
        if not shares:
            continue
        amount = staked.get(s, shares)  # beacon-chain shares count 1:1
        assets.append(NodeAssetState(token, strategy, shares, int(amount)))
    return NodeState(
        address=node,
        node_id=int(node_id),
        operator=to_checksum_address(operator),
        assets=tuple(assets),
    )


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


def read_ahead(items: Iterator[T], *, depth: int = 1) -> Iterator[T]:
    """The items of `items`, each produced by a worker thread while the consumer handles the
    one before (at most `depth` ahead), so that the node's next answer is read and decoded
    while the consumer stores the last one. An exception of the producer is raised at its
    place in the sequence. When the consumer stops early, the producer stops before its next
    item (a read in flight runs to its end or its timeout, in the background). `items` must
    not touch the database: it runs in another thread, on none of the consumer's connections."""
    batches = read_ahead_gathered(items, depth=depth)
    try:
        for batch in batches:
            yield from batch
    finally:
        batches.close()


def read_ahead_gathered(
    items: Iterator[T],
    *,
    depth: int = 1,
    weight: Callable[[T], int] = lambda _: 1,
    limit: int = 1,
    ahead: int | None = None,
) -> Generator[list[T], None, None]:
    """`read_ahead`, the items handed over in lists: the next item (waited for), then those
    the producer has already made after it (never waited for), while their total `weight`
    stays within `limit`. A consumer slower than the producer so takes several items at once
    (a backfill stores several ranges in one transaction); one as fast takes them one by one,
    as soon as each is made. With `ahead`, the producer also waits while the items it made
    and the consumer has not taken weigh that much (the memory a backfill holds)."""
    producer = _Producer(items, depth=depth, weight=weight, ahead=ahead)
    threading.Thread(target=producer.run, name="read-ahead", daemon=True).start()
    held: _Answer | None = None  # an answer taken from the queue for the next list
    try:
        while True:
            done, value = held or producer.answers.get()
            if done:
                if value is not None:
                    raise value
                return
            producer.wanted.release()  # the next item is read while this one is handled
            batch, held = producer.gather(value, limit)
            producer.taken(batch)
            yield batch
    finally:
        producer.stopped.set()


_Answer = tuple[bool, Any]  # (done, the item) or (done, the exception raised or None)


class _Producer(Generic[T]):
    """read_ahead_gathered's worker: makes the items in its thread, one per permit of `wanted`
    (the consumer's), and while the items made and not taken weigh less than `ahead`."""

    def __init__(
        self, items: Iterator[T], *, depth: int, weight: Callable[[T], int], ahead: int | None
    ) -> None:
        self.items, self.weight, self.ahead = items, weight, ahead
        self.answers: queue.Queue[_Answer] = queue.Queue()
        self.wanted = threading.Semaphore(depth)  # one permit per item the consumer will take
        self.stopped = threading.Event()
        self.made = threading.Condition()
        self.waiting = 0  # the weight of the items made and not yet taken

    def run(self) -> None:
        try:
            while self._may_make():
                item = next(self.items)
                with self.made:
                    self.waiting += self.weight(item)
                self.answers.put((False, item))
        except StopIteration:
            self.answers.put((True, None))
        except BaseException as exc:
            self.answers.put((True, exc))  # raised by the consumer

    def _may_make(self) -> bool:
        while not self.wanted.acquire(timeout=0.1):
            if self.stopped.is_set():
                return False
        with self.made:
            while self.ahead is not None and self.waiting >= self.ahead:
                if self.stopped.is_set():
                    break
                self.made.wait(0.1)
        return not self.stopped.is_set()

    def gather(self, first: T, limit: int) -> tuple[list[T], _Answer | None]:
        """`first` and the items already made after it, within `limit`; and the answer taken
        that did not fit, if any (the end, an exception, or an item over the limit)."""
        batch, total = [first], self.weight(first)
        while True:
            try:
                answer = self.answers.get_nowait()
            except queue.Empty:
                return batch, None
            done, value = answer
            if done or total + self.weight(value) > limit:
                return batch, answer
            self.wanted.release()
            batch.append(value)
            total += self.weight(value)

    def taken(self, batch: list[T]) -> None:
        with self.made:
            self.waiting -= sum(map(self.weight, batch))
            self.made.notify()


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
