"""The chain gateway's LAT reads: a LAT's state, its oracle, its proxies' implementations, the
views a deployment lacks, its staker nodes' stakes, the core contracts its manager names,
operators' splits and price feeds, each at one block, as `results` dataclasses."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from eth_utils import to_checksum_address

from chain import reverts
from chain.abi import Function, function
from chain.calls import Call, _required
from chain.errors import ChainCallReverted
from chain.logs import LogReads
from chain.results import (
    Block,
    LatState,
    NodeAssetState,
    NodeState,
    TokenState,
)
from chain.transport import hex_bytes
from core.addresses import is_beacon_chain_eth

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


class LatReads(LogReads):
    """A LAT's state and what it is built of."""

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


def _dispatches(code: bytes, selector: bytes) -> bool:
    """Whether the code compares a call's selector with `selector` as Solidity's dispatcher
    does: `PUSH4 selector EQ` (legacy and via-IR code alike). The selector alone is not
    enough: code that calls the function on another contract holds it too (`PUSH4 selector
    PUSH1 0xe0 SHL`), as Mainnet v1's LiquidToken holds its oracle's `arePricesStale()`."""
    return b"\x63" + selector + b"\x14" in code


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
