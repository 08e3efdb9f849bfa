"""Each UTC day's state of an AVS and of a LAT, as the rewards APY needs it (decisions.md,
"Rewards APY"), read from the chain at the last block before the day began: the state of day
`d`. A day is read once it has ended (the chain head's time is past it), back to 365 days
before the last one (the longest window) but not before the LAT existed: the first run after a
LAT is imported reads its history from an archive node, every later run only the days that
ended since. Both paths are this one.

- `AvsDay`: the operators registered to the AVS for the whole day (their registrations are the
  AVS's events, metrics/avs.py), their delegated shares summed per strategy of the AVS
  submissions paying that day (only the strategies each restakes where the AVS's ServiceManager
  answers `getOperatorRestakedStrategies`), and the default split. Read under the AVS's lock.
- `LatDay`: the LAT's totals and TVL in ETH, its nodes' operators and withdrawable shares, those
  operators' own delegated shares and restaked strategies, and the ETH prices of its tokens and
  of the tokens it is paid in.

A day whose row lacks a strategy or a token that a submission paying it needs (a retroactive
submission arrived later) is read again; a reorg moves the days after its fork back
(metrics/avs.py). A node that is not an archive keeps no state of the older days: those are left
unread (and named in the LAT's gaps), the days it keeps are read, and every run tries again."""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date, timedelta
from decimal import Decimal

from django.db import transaction

from chain import eigenlayer
from chain.abi import function
from chain.errors import ChainCallReverted, ChainUnavailable
from chain.gateway import Gateway
from chain.history import blocks_before, state_kept_from
from chain.results import Block, LatState, NodeState
from core.addresses import ZERO_ADDRESS
from lats.models import Lat, PriceFeed, Token
from lats.state import lat_state_at, unit_eth_price_at
from lats.values import WAD_DECIMAL
from metrics.models import AvsDay, AvsEvent, LatDay, RewardSubmission
from metrics.timeline import day_range, day_start, last_complete_day, utc_day

logger = logging.getLogger(__name__)

KEEP_DAYS = 365  # the longest APY window


# --- what a day needs ---------------------------------------------------------------------


def paying_days(submission: RewardSubmission) -> tuple[date, date]:
    """The first and last day a submission pays: the days after its start day, to the day its
    period ends (decisions.md; EigenLayer's starts and durations are whole days)."""
    start = int(submission.start_timestamp)
    return utc_day(start) + timedelta(days=1), utc_day(start + int(submission.duration))


def submissions_paying(avs_id: int, first: date, last: date) -> list[RewardSubmission]:
    """The AVS's counted submissions that pay on any day of first..last, in chain order."""
    return [
        s
        for s in RewardSubmission.objects.filter(
            avs_id=avs_id,
            start_timestamp__lt=day_start(last),
            duration__gt=0,
        ).order_by("block_number", "log_index")
        if paying_days(s)[1] >= first
    ]


@dataclass
class Needs:
    strategies: set[str] = field(default_factory=set)
    tokens: set[str] = field(default_factory=set)


def needs_by_day(
    submissions: Iterable[RewardSubmission], days: Sequence[date], *, kinds: set[str]
) -> dict[date, Needs]:
    """Per day, the strategies and tokens of the submissions of `kinds` paying on it."""
    needs = {day: Needs() for day in days}
    for submission in submissions:
        first, last = paying_days(submission)
        for day in days:
            if first <= day <= last:
                needs[day].tokens.add(submission.token)
                if submission.kind in kinds:
                    needs[day].strategies.update(submission.strategies)
    return needs


def window(head: Block, first_day: date) -> list[date]:
    """The days to hold: from `first_day` (at most KEEP_DAYS back) to the last complete one."""
    last = last_complete_day(head.timestamp)
    return day_range(max(first_day, last - timedelta(days=KEEP_DAYS - 1)), last)


def days_to_read(
    days: Sequence[date], stored: dict[date, Needs], needs: dict[date, Needs]
) -> list[date]:
    """The days without a row, or whose row lacks what a submission paying the day needs."""
    out = []
    for day in days:
        have, want = stored.get(day), needs[day]
        if have is None or not (want.strategies <= have.strategies and want.tokens <= have.tokens):
            out.append(day)
    return out


def day_blocks(
    gateway: Gateway, days: Sequence[date], *, low: Block, head: Block
) -> dict[date, Block]:
    """The state block of each day: the last block before it began."""
    found = blocks_before(gateway, [day_start(d) for d in days], low=low, high=head)
    return {d: found[day_start(d)] for d in days}


@dataclass
class DaysRead:
    """What a run of the days' update did: how many days it read, and which it could not (the
    node keeps no state that old)."""

    read: int = 0
    unread: list[date] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.read)


def read_days(
    gateway: Gateway,
    address: str,
    days: Sequence[date],
    blocks: dict[date, Block],
    head: Block,
    read_one: Callable[[date], None],
) -> DaysRead:
    """`read_one(day)` for each day, oldest first. Where the node refuses a day's state, the
    first block whose state it keeps is found (at `address`) and the days before it are left
    unread; any other failure is raised."""
    out = DaysRead()
    first_kept: int | None = None
    for day in days:
        if first_kept is not None and blocks[day].number < first_kept:
            out.unread.append(day)
            continue
        try:
            read_one(day)
        except ChainUnavailable as exc:
            if first_kept is not None:
                raise
            first_kept = state_kept_from(
                gateway, address, exc, low=blocks[day].number, high=head.number
            )
            out.unread.append(day)
            continue
        out.read += 1
    if out.unread:
        logger.warning(
            "%s: the node keeps no state before block %s: %s day(s) from %s to %s not read",
            address,
            first_kept,
            len(out.unread),
            out.unread[0],
            out.unread[-1],
        )
    return out


# --- who is registered ----------------------------------------------------------------------


class Registrations:
    """Each operator's registrations to an AVS, as its events tell them: an operator counts on
    day `d` when it registered before `d` began and did not deregister before `d` ended (a
    registration counts from the next UTC day; a deregistration takes the day it happens)."""

    def __init__(self, events: Iterable[AvsEvent]) -> None:
        self.spans: dict[str, list[tuple[date, date | None]]] = defaultdict(list)
        since: dict[str, int] = {}
        for event in sorted(events, key=lambda e: (e.block_number, e.log_index)):
            if event.value == 1 and event.operator not in since:
                since[event.operator] = event.block_timestamp
            elif event.value == 0 and event.operator in since:
                begun = since.pop(event.operator)
                self.spans[event.operator].append(
                    (utc_day(begun) + timedelta(days=1), utc_day(event.block_timestamp))
                )
        for operator, begun in since.items():
            self.spans[operator].append((utc_day(begun) + timedelta(days=1), None))

    @classmethod
    def of_avs(cls, avs_id: int) -> Registrations:
        return cls(AvsEvent.objects.filter(avs_id=avs_id, kind=AvsEvent.Kind.REGISTRATION))

    def registered(self, operator: str, day: date) -> bool:
        return any(
            first <= day and (end is None or day < end)
            for first, end in self.spans.get(operator, ())
        )

    def on(self, day: date) -> list[str]:
        return sorted(op for op in self.spans if self.registered(op, day))

    def __bool__(self) -> bool:
        return bool(self.spans)


# --- the AVS's days -------------------------------------------------------------------------


def avs_days_update(*, lat: Lat, gateway: Gateway, head: Block) -> DaysRead:
    """Read the AVS's days that ended and are not stored (or lack a strategy); call holding the
    AVS's lock (metrics/avs.py)."""
    lats = list(Lat.objects.filter(avs_id=lat.avs_id).order_by("deployment_block"))
    low = gateway.block(lats[0].deployment_block)
    first_day = utc_day(low.timestamp) + timedelta(days=1)
    days = window(head, first_day)
    if not days:
        return DaysRead()
    submissions = submissions_paying(lat.avs_id, days[0], days[-1])
    needs = needs_by_day(submissions, days, kinds={RewardSubmission.Kind.AVS})
    for need in needs.values():
        need.tokens = set()  # the AVS's days hold no prices
    stored = {
        row.day: Needs(set(row.strategies))
        for row in AvsDay.objects.filter(avs_id=lat.avs_id, day__gte=days[0])
    }
    todo = days_to_read(days, stored, needs)
    if not todo:
        return DaysRead()
    blocks = day_blocks(gateway, todo, low=low, head=head)
    registrations = Registrations.of_avs(lat.avs_id)

    def read_one(day: date) -> None:
        _avs_day(lat, gateway, day, blocks[day], registrations, sorted(needs[day].strategies))

    return read_days(gateway, lat.proxy_address, todo, blocks, head, read_one)


def _avs_day(
    lat: Lat,
    gateway: Gateway,
    day: date,
    block: Block,
    registrations: Registrations,
    strategies: list[str],
) -> None:
    operators = registrations.on(day)
    state = eigenlayer.operators_state(
        gateway,
        delegation_manager=lat.core_contract("delegationManager"),
        coordinator=lat.core_contract("rewardsCoordinator"),
        avs=lat.avs.address,
        operators=operators if strategies else [],
        strategies=strategies,
        block=block.number,
    )
    totals = dict.fromkeys(strategies, 0)
    for op in operators if strategies else []:
        restaked = state.restaked[op]
        for strategy in strategies:
            if restaked is None or strategy in restaked:
                totals[strategy] += state.shares[op][strategy]
    AvsDay.objects.update_or_create(
        avs_id=lat.avs_id,
        day=day,
        defaults={
            "block_number": block.number,
            "block_hash": block.hash,
            "strategies": strategies,
            "totals": {s: str(v) for s, v in totals.items()},
            "operators": len(operators),
            "default_split": state.default_split,
        },
    )


# --- the LAT's days -------------------------------------------------------------------------


def lat_days_update(*, lat: Lat, gateway: Gateway, head: Block) -> DaysRead:
    """Read the LAT's days that ended and are not stored (or lack a strategy or a price a
    submission paying them needs)."""
    low = gateway.block(lat.deployment_block)
    first_day = utc_day(low.timestamp) + timedelta(days=1)
    days = window(head, first_day)
    if not days:
        return DaysRead()
    submissions = submissions_paying(lat.avs_id, days[0], days[-1])
    needs = needs_by_day(submissions, days, kinds={RewardSubmission.Kind.OPERATOR_DIRECTED})
    stored = {
        row.day: Needs(set(row.strategies), set(row.prices))
        for row in LatDay.objects.filter(lat=lat, day__gte=days[0])
    }
    todo = days_to_read(days, stored, needs)
    if not todo:
        return DaysRead()
    blocks = day_blocks(gateway, todo, low=low, head=head)

    def read_one(day: date) -> None:
        reading = _lat_day(lat, gateway, blocks[day], needs[day])
        with transaction.atomic():
            LatDay.objects.update_or_create(lat=lat, day=day, defaults=reading)

    return read_days(gateway, lat.proxy_address, todo, blocks, head, read_one)


def _lat_day(lat: Lat, gateway: Gateway, block: Block, needs: Needs) -> dict:
    state = lat_state_at(lat=lat, gateway=gateway, block=block)
    delegation_manager = lat.core_contract("delegationManager")
    nodes: Sequence[NodeState] = (
        gateway.read_nodes(
            nodes=state.nodes,
            strategies=[(t.address, t.strategy) for t in state.tokens],
            delegation_manager=delegation_manager,
            block=block,
        )
        if state.nodes
        else []
    )
    unit_price = unit_eth_price_at(lat=lat, gateway=gateway, block=block)
    delegated = [
        n for n in nodes if n.operator != ZERO_ADDRESS and any(a.core_shares for a in n.assets)
    ]
    operators = sorted({n.operator for n in delegated})
    strategies = sorted({t.strategy for t in state.tokens} | needs.strategies)
    ops = eigenlayer.operators_state(
        gateway,
        delegation_manager=delegation_manager,
        coordinator=lat.core_contract("rewardsCoordinator"),
        avs=lat.avs.address,
        operators=operators,
        strategies=strategies,
        block=block.number,
    )
    return {
        "block_number": block.number,
        "block_hash": block.hash,
        "total_assets": state.total_assets,
        "total_supply": state.total_supply,
        "tvl_eth": _tvl_eth(state, nodes, unit_price),
        "strategies": strategies,
        "nodes": [
            [n.operator, {a.strategy: str(a.core_shares) for a in n.assets if a.core_shares}]
            for n in delegated
        ],
        "operators": {
            op: {
                "shares": {s: str(v) for s, v in ops.shares[op].items()},
                "restaked": None if (restaked := ops.restaked[op]) is None else sorted(restaked),
            }
            for op in operators
        },
        "prices": _prices(lat, gateway, block, state, unit_price, needs.tokens),
    }


def _tvl_eth(state: LatState, nodes: Sequence[NodeState], unit_price: int | None) -> Decimal | None:
    """What `metrics.selectors.lat_tvl` computes of the stored state, of this state: every
    token's unstaked, queued and staked amounts through its price and the unit's ETH price."""
    if unit_price is None:
        return None
    staked: dict[str, int] = defaultdict(int)
    for node in nodes:
        for asset in node.assets:
            staked[asset.token] += asset.staked_amount
    in_unit = sum(
        (
            Decimal(t.balance + t.queued_balance + staked[t.address])
            * Decimal(t.price_per_unit)
            / Decimal(10) ** t.decimals
            for t in state.tokens
        ),
        Decimal(0),
    )
    return (in_unit / WAD_DECIMAL * Decimal(unit_price) / WAD_DECIMAL).quantize(Decimal(10) ** -18)


def _prices(
    lat: Lat,
    gateway: Gateway,
    block: Block,
    state: LatState,
    unit_price: int | None,
    tokens: set[str],
) -> dict[str, str | None]:
    """ETH per raw unit of each of the LAT's tokens (its own price, through the unit's ETH
    price) and of each other token it is paid in (its price feed, set in admin or the
    manifest); None where neither values it."""
    prices: dict[str, Decimal | None] = {}
    for t in state.tokens:
        prices[t.address] = (
            None
            if unit_price is None
            else Decimal(t.price_per_unit)
            * Decimal(unit_price)
            / WAD_DECIMAL
            / WAD_DECIMAL
            / Decimal(10) ** t.decimals
        )
    others = sorted(tokens - prices.keys())
    feeds = {
        f.token_address: f
        for f in PriceFeed.objects.filter(chain_id=lat.chain_id, token_address__in=others)
    }
    for token in others:
        feed = feeds.get(token)
        prices[token] = None if feed is None else _feed_price(lat, gateway, block, token, feed)
    return {token: None if p is None else str(p) for token, p in prices.items()}


def _feed_price(
    lat: Lat, gateway: Gateway, block: Block, token: str, feed: PriceFeed
) -> Decimal | None:
    try:
        answer, decimals = gateway.price_feed(feed=feed.feed_address, block=block)
    except ChainCallReverted:
        return None
    known = Token.objects.filter(chain_id=lat.chain_id, address=token).first()
    if known is not None:
        token_decimals = known.decimals
    else:
        (result,) = gateway.multicall(
            [(token, function("TestERC20", "decimals"), ())], block=block.number
        )
        if isinstance(result, ChainCallReverted):
            return None
        token_decimals = int(result[0])
    return Decimal(answer) / Decimal(10) ** decimals / Decimal(10) ** token_decimals
