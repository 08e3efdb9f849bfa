"""The EigenLayer interface the rewards APY reads (chain.md, "For the rewards APY"; decisions.md,
"Rewards APY"), by signature, so that any chain's EigenLayer is read the same way: the events
of an AVS (rewards submissions of every kind, operators' registrations, operators' and the
default split) and the state of one day (operators' delegated shares, the restaked strategies
the AVS's ServiceManager names, the default split).

Reads go through the gateway (Multicall3 where it has code, JSON-RPC batches elsewhere): a day
of an AVS of 250 operators and 13 strategies is a few calls, not thousands."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from eth_utils import to_checksum_address

from chain.abi import Event, event_of, function_of
from chain.errors import ChainCallReverted, ChainUnavailable

if TYPE_CHECKING:
    from chain.gateway import Call, Gateway

SUBMISSION = "((address,uint96)[],address,uint256,uint32,uint32)"
OPERATOR_DIRECTED = "((address,uint96)[],address,(address,uint256)[],uint32,uint32,string)"
OPERATOR_SET = "(address,uint32)"

# What the rewards APY counts (decisions.md).
AVS_SUBMISSION = event_of(
    "AVSRewardsSubmissionCreated", ("address", "uint256", "bytes32"), (SUBMISSION,)
)
OD_SUBMISSION = event_of(
    "OperatorDirectedAVSRewardsSubmissionCreated",
    ("address", "address", "bytes32"),
    ("uint256", OPERATOR_DIRECTED),
)
REGISTRATION = event_of("OperatorAVSRegistrationStatusUpdated", ("address", "address"), ("uint8",))
OPERATOR_SPLIT = event_of(
    "OperatorAVSSplitBipsSet", ("address", "address", "address"), ("uint32", "uint16", "uint16")
)
DEFAULT_SPLIT = event_of("DefaultOperatorSplitBipsSet", (), ("uint16", "uint16"))
# The kinds it does not count, only notices: rewards for every staker or earner of the chain,
# and an AVS's operator-set rewards (their operator set names the AVS).
FOR_ALL = event_of(
    "RewardsSubmissionForAllCreated", ("address", "uint256", "bytes32"), (SUBMISSION,)
)
FOR_ALL_EARNERS = event_of(
    "RewardsSubmissionForAllEarnersCreated", ("address", "uint256", "bytes32"), (SUBMISSION,)
)
OD_OPERATOR_SET = event_of(
    "OperatorDirectedOperatorSetRewardsSubmissionCreated",
    ("address", "bytes32"),
    (OPERATOR_SET, "uint256", OPERATOR_DIRECTED),
)
UNIQUE_STAKE = event_of(
    "UniqueStakeRewardsSubmissionCreated",
    ("address", "bytes32"),
    (OPERATOR_SET, "uint256", SUBMISSION),
)
TOTAL_STAKE = event_of(
    "TotalStakeRewardsSubmissionCreated",
    ("address", "bytes32"),
    (OPERATOR_SET, "uint256", SUBMISSION),
)
NOT_COUNTED = (FOR_ALL, FOR_ALL_EARNERS, OD_OPERATOR_SET, UNIQUE_STAKE, TOTAL_STAKE)
_CHAIN_WIDE = {FOR_ALL.name, FOR_ALL_EARNERS.name}  # paid to every staker (or earner)

GET_OPERATORS_SHARES = function_of("getOperatorsShares(address[],address[])", ("uint256[][]",))
OPERATOR_SHARES = function_of("operatorShares(address,address)", ("uint256",))
RESTAKED_STRATEGIES = function_of("getOperatorRestakedStrategies(address)", ("address[]",))
DEFAULT_SPLIT_BIPS = function_of("defaultOperatorSplitBips()", ("uint16",))

# Calls per eth_call: a ServiceManager's restaked strategies can cost a lot of gas each, and
# nodes cap an eth_call's gas; the shares of 100 operators in 13 strategies stay far below it.
RESTAKED_PER_CALL = 50
OPERATORS_PER_CALL = 100

# AvsLog kinds.
SUBMITTED = "avs"
OPERATOR_DIRECTED_SUBMITTED = "operatorDirected"
REGISTERED = "registration"
SPLIT_SET = "split"
DEFAULT_SPLIT_SET = "defaultSplit"
NOTICED = "noticed"


@dataclass(frozen=True)
class Rewards:
    """A rewards submission: the token, its strategies with their multipliers, and either the
    amount (an AVS submission) or each operator's amount (operator-directed), paid over
    [start, start + duration)."""

    token: str
    strategies: tuple[str, ...]
    multipliers: tuple[int, ...]
    amount: int
    operator_amounts: tuple[tuple[str, int], ...]
    start: int
    duration: int


@dataclass(frozen=True)
class AvsLog:
    """One event of an AVS (or of every AVS: `avs` is "" for the chain-wide kinds and the
    default split)."""

    kind: str
    name: str  # the event's name
    block_number: int
    block_hash: str
    tx_hash: str
    log_index: int
    avs: str
    operator: str = ""  # registrations, splits
    value: int = 0  # 1 registered / 0 unregistered; the new split; the new default split
    activated_at: int = 0  # splits
    rewards: Rewards | None = None  # submissions, counted or not


COUNTED = (AVS_SUBMISSION, OD_SUBMISSION, REGISTRATION, OPERATOR_SPLIT, DEFAULT_SPLIT)


def avs_log_topics() -> list[str]:
    return [e.topic for e in (*COUNTED, *NOT_COUNTED)]


def avs_logs(
    gateway: Gateway, *, addresses: Sequence[str], from_block: int, to_block: int
) -> list[AvsLog]:
    """Every rewards-APY event of every AVS that the RewardsCoordinator and AVSDirectory at
    `addresses` emitted in from_block..to_block (one eth_getLogs), decoded, in chain order;
    the caller keeps its AVS's (`avs`) and the chain-wide ones."""
    raw = gateway.logs(
        address=list(addresses),
        topics=[avs_log_topics()],
        from_block=from_block,
        to_block=to_block,
    )
    out = []
    for log in raw:
        try:
            out.append(_decode(log))
        except Exception as exc:  # a log of another shape under a known topic
            raise ChainUnavailable("the node answered an undecodable rewards log") from exc
    return sorted(out, key=lambda log: (log.block_number, log.log_index))


_BY_TOPIC: dict[str, Event] = {e.topic: e for e in (*COUNTED, *NOT_COUNTED)}


def _decode(log: dict[str, Any]) -> AvsLog:
    event = _BY_TOPIC[log["topics"][0]]
    values = event.decode(log["topics"][1:], log["data"])
    position = {
        "name": event.name,
        "block_number": int(log["blockNumber"], 16),
        "block_hash": log["blockHash"],
        "tx_hash": log["transactionHash"],
        "log_index": int(log["logIndex"], 16),
    }
    address = to_checksum_address
    if event is AVS_SUBMISSION:
        return AvsLog(SUBMITTED, avs=address(values[0]), rewards=_rewards(values[3]), **position)
    if event is OD_SUBMISSION:
        return AvsLog(
            OPERATOR_DIRECTED_SUBMITTED,
            avs=address(values[1]),
            rewards=_operator_directed(values[4]),
            **position,
        )
    if event is REGISTRATION:
        return AvsLog(
            REGISTERED,
            avs=address(values[1]),
            operator=address(values[0]),
            value=int(values[2]),
            **position,
        )
    if event is OPERATOR_SPLIT:
        return AvsLog(
            SPLIT_SET,
            avs=address(values[2]),
            operator=address(values[1]),
            activated_at=int(values[3]),
            value=int(values[5]),
            **position,
        )
    if event is DEFAULT_SPLIT:
        return AvsLog(DEFAULT_SPLIT_SET, avs="", value=int(values[1]), **position)
    if event.name in _CHAIN_WIDE:
        return AvsLog(NOTICED, avs="", rewards=_rewards(values[3]), **position)
    submission = values[4]
    rewards = _operator_directed(submission) if event is OD_OPERATOR_SET else _rewards(submission)
    return AvsLog(NOTICED, avs=address(values[2][0]), rewards=rewards, **position)


def _strategies(pairs: Sequence[tuple[str, int]]) -> tuple[tuple[str, ...], tuple[int, ...]]:
    return (
        tuple(to_checksum_address(s) for s, _ in pairs),
        tuple(int(m) for _, m in pairs),
    )


def _rewards(submission: tuple) -> Rewards:
    pairs, token, amount, start, duration = submission
    strategies, multipliers = _strategies(pairs)
    return Rewards(
        token=to_checksum_address(token),
        strategies=strategies,
        multipliers=multipliers,
        amount=int(amount),
        operator_amounts=(),
        start=int(start),
        duration=int(duration),
    )


def _operator_directed(submission: tuple) -> Rewards:
    pairs, token, operator_rewards, start, duration, _description = submission
    strategies, multipliers = _strategies(pairs)
    amounts = tuple((to_checksum_address(op), int(amount)) for op, amount in operator_rewards)
    return Rewards(
        token=to_checksum_address(token),
        strategies=strategies,
        multipliers=multipliers,
        amount=sum(amount for _, amount in amounts),
        operator_amounts=amounts,
        start=int(start),
        duration=int(duration),
    )


# --- one day's state of an AVS's operators ---------------------------------------------------


@dataclass(frozen=True)
class OperatorsState:
    """At one block: each operator's delegated shares by strategy (net of slashing, as
    `operatorShares`), the strategies the AVS's ServiceManager says each operator restakes
    (None where it does not answer: then every strategy counts), and the coordinator's default
    split (None where it does not answer)."""

    shares: dict[str, dict[str, int]]
    restaked: dict[str, frozenset[str] | None]
    default_split: int | None


def operators_state(
    gateway: Gateway,
    *,
    delegation_manager: str,
    coordinator: str,
    avs: str,
    operators: Sequence[str],
    strategies: Sequence[str],
    block: int,
) -> OperatorsState:
    """The operators' state at `block` in a few calls: `getOperatorsShares` for up to
    OPERATORS_PER_CALL operators at a time (`operatorShares` per pair where it does not
    answer), each operator's restaked strategies (RESTAKED_PER_CALL per call) and the
    default split."""
    chunks = [
        list(operators[i : i + OPERATORS_PER_CALL])
        for i in range(0, len(operators), OPERATORS_PER_CALL)
    ]
    calls: list[Call] = [(coordinator, DEFAULT_SPLIT_BIPS, ())]
    if strategies:
        calls += [
            (delegation_manager, GET_OPERATORS_SHARES, (chunk, list(strategies)))
            for chunk in chunks
        ]
    first = gateway.multicall(calls, block=block)
    shares: dict[str, dict[str, int]] = {op: {} for op in operators}
    for chunk, answer in zip(chunks if strategies else [], first[1:], strict=True):
        rows = (
            _pairwise_shares(gateway, delegation_manager, chunk, strategies, block)
            if isinstance(answer, ChainCallReverted)
            else answer[0]
        )
        if len(rows) != len(chunk) or any(len(row) != len(strategies) for row in rows):
            raise ChainUnavailable("getOperatorsShares answered the wrong shape")
        for op, row in zip(chunk, rows, strict=True):
            shares[op] = {s: int(v) for s, v in zip(strategies, row, strict=True)}
    restaked_calls: list[Call] = [(avs, RESTAKED_STRATEGIES, (op,)) for op in operators]
    answers: list[tuple | ChainCallReverted] = []
    for i in range(0, len(restaked_calls), RESTAKED_PER_CALL):
        answers += gateway.multicall(restaked_calls[i : i + RESTAKED_PER_CALL], block=block)
    default = first[0]
    return OperatorsState(
        shares=shares,
        restaked={op: _restaked(a) for op, a in zip(operators, answers, strict=True)},
        default_split=None if isinstance(default, ChainCallReverted) else int(default[0]),
    )


def _pairwise_shares(
    gateway: Gateway,
    delegation_manager: str,
    operators: Sequence[str],
    strategies: Sequence[str],
    block: int,
) -> list[list[int]]:
    """`operatorShares(operator, strategy)` per pair: a DelegationManager older than
    `getOperatorsShares`."""
    calls: list[Call] = [
        (delegation_manager, OPERATOR_SHARES, (op, s)) for op in operators for s in strategies
    ]
    values = [int(_required_value(answer)) for answer in gateway.multicall(calls, block=block)]
    width = len(strategies)
    return [values[n * width : (n + 1) * width] for n in range(len(operators))]


def _required_value(answer: tuple | ChainCallReverted) -> int:
    if isinstance(answer, ChainCallReverted):
        raise answer
    return int(answer[0])


def _restaked(answer: tuple | ChainCallReverted) -> frozenset[str] | None:
    """A ServiceManager's answer; None where there is none to read (a revert, an account
    without code: an empty answer that does not decode)."""
    if isinstance(answer, ChainCallReverted):
        return None
    return frozenset(_checksummed(s) for s in answer[0])


# The same few strategies answer for every operator and day: their checksums are remembered (a
# year of an AVS of 250 operators and 13 strategies asks for about a million).
_checksummed = functools.lru_cache(maxsize=4096)(to_checksum_address)
