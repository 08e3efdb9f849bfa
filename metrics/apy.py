"""A LAT's APY windows (decisions.md, "Values" and "Rewards APY"), from its stored days.

**Rewards (`apy`)**, as EigenLayer splits an AVS's rewards, day by day. On day `d`, in the
state of `d` (its last block before 00:00 UTC of `d`, metrics/days.py):
- an AVS submission pays `amount / (duration / 1 day)` on each day after its start day; a node
  whose operator is registered to the AVS for the whole day earns `w / W * (1 - split)` of it,
  where `w = Σ multiplier * shares` of the node over the submission's strategies (those its
  operator restakes, where the AVS's ServiceManager says which) and `W` the same sum over every
  such operator's delegated shares (`AvsDay.totals`);
- an operator-directed submission pays each operator's amount over the days of its period on
  which the operator was registered; a node earns `w / W_o * (1 - split)` of its operator's
  day, `W_o` the same sum over the operator's own delegated shares;
- `split` is the operator's split for the AVS in force that day (from the UTC day after its
  `activatedAt`), else the coordinator's default, else 1,000 bips.
Each day's earnings `E(d)` are valued in ETH at the prices of that day's state; `V(d)` is the
LAT's TVL in ETH in the same state. A window of `n` whole days ending with the last complete
day: `365 * ΣE / ΣV * 100`. `avg30d`: the mean of the last 30 daily values.

**Exchange rate (`nativeApy`)**: the growth of totalAssets/totalSupply across the same days
(the hourly points of metrics/rates.py), annualised simply; `avg30d` the mean of 30 one-day
values. A window with less history is the rate over the days there are; none gives "0".

Not counted, and said in the LAT's gaps: the kinds of submission EigenLayer pays otherwise
(rewards for all stakers or earners, operator sets, unique or total stake), a token that
neither the LAT nor a price feed values, and no rewards at all where no operator ever
registered to the AVS. EigenLayer floors each earner's daily amount to whole token units; the
figures here are not floored (a difference below one unit a day)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date, timedelta
from decimal import Decimal

from lats.models import Lat
from lats.values import exchange_rate
from metrics.days import Registrations, paying_days, submissions_paying
from metrics.models import AvsDay, AvsEvent, LatDay, RatePoint, RewardSubmission
from metrics.timeline import DAY, HOUR, as_datetime, day_range, day_start

WINDOWS = {
    "current": 1,
    "trailing7d": 7,
    "trailing30d": 30,
    "trailing3m": 91,
    "trailing6m": 182,
    "trailing1y": 365,
}
AVERAGED = 30  # avg30d: the mean of this many daily values
DEFAULT_SPLIT_BIPS = 1_000
BIPS = Decimal(10_000)
ZERO = Decimal(0)


class Splits:
    """The operators' splits for an AVS and the coordinator's default, by the day they take
    effect: an operator's from the UTC day after its `activatedAt`, the default from the UTC day
    after it was set."""

    def __init__(self, events: Iterable[AvsEvent]) -> None:
        self.by_operator: dict[str, list[tuple[date, int]]] = defaultdict(list)
        self.defaults: list[tuple[date, int]] = []
        ordered = sorted(events, key=lambda e: (e.activated_at, e.block_number, e.log_index))
        for event in ordered:
            if event.kind == AvsEvent.Kind.SPLIT:
                effective = _day_after(event.activated_at)
                self.by_operator[event.operator].append((effective, event.value))
            elif event.kind == AvsEvent.Kind.DEFAULT_SPLIT:
                self.defaults.append((_day_after(event.block_timestamp), event.value))
        self.defaults.sort(key=lambda item: item[0])

    @classmethod
    def of_avs(cls, avs_id: int) -> Splits:
        kinds = (AvsEvent.Kind.SPLIT, AvsEvent.Kind.DEFAULT_SPLIT)
        return cls(AvsEvent.objects.filter(avs_id=avs_id, kind__in=kinds))

    def of(self, operator: str, day: date, default: int | None) -> int:
        """The operator's split in bips on `day`; `default` is the coordinator's default as
        that day's state read it (None where it did not answer)."""
        own = _latest(self.by_operator.get(operator, []), day)
        if own is None:
            own = default if default is not None else _latest(self.defaults, day)
        return min(DEFAULT_SPLIT_BIPS if own is None else own, 10_000)


def _day_after(timestamp: int) -> date:
    return date(1970, 1, 1) + timedelta(days=timestamp // DAY + 1)


def _latest(changes: Sequence[tuple[date, int]], day: date) -> int | None:
    value = None
    for effective, bips in changes:
        if effective <= day:
            value = bips
    return value


@dataclass(frozen=True)
class DayEarnings:
    day: date
    earned: Decimal  # E(d), ETH
    value: Decimal | None  # V(d), ETH; None where the unit of account cannot be valued


@dataclass
class Earnings:
    days: list[DayEarnings] = field(default_factory=list)
    unvalued: dict[str, list[date]] = field(default_factory=lambda: defaultdict(list))


def lat_earnings(lat: Lat, days: Sequence[date]) -> Earnings:
    """E(d) and V(d) of every day of `days` that has both its LAT day and its AVS day."""
    out = Earnings()
    if not days:
        return out
    lat_days = {row.day: row for row in LatDay.objects.filter(lat=lat, day__in=days)}
    avs_days = {row.day: row for row in AvsDay.objects.filter(avs_id=lat.avs_id, day__in=days)}
    submissions = submissions_paying(lat.avs_id, days[0], days[-1])
    registrations = Registrations.of_avs(lat.avs_id)
    splits = Splits.of_avs(lat.avs_id)
    directed = _registered_days(submissions, registrations)
    for day in days:
        lat_day, avs_day = lat_days.get(day), avs_days.get(day)
        if lat_day is None or avs_day is None:
            continue
        earned = ZERO
        context = _DayContext(day, lat_day, avs_day, registrations, splits)
        for submission in submissions:
            first, last = paying_days(submission)
            if not first <= day <= last:
                continue
            price = lat_day.prices.get(submission.token)
            if price is None:
                out.unvalued[submission.token].append(day)
                continue
            tokens = (
                context.avs_part(submission)
                if submission.kind == RewardSubmission.Kind.AVS
                else context.directed_part(submission, directed)
            )
            earned += tokens * Decimal(price)
        out.days.append(DayEarnings(day, earned, lat_day.tvl_eth))
    return out


def _registered_days(
    submissions: Iterable[RewardSubmission], registrations: Registrations
) -> dict[tuple[int, str], int]:
    """For each operator-directed submission and operator, the days of its period on which the
    operator was registered (its amount is paid over those)."""
    out = {}
    for submission in submissions:
        if submission.kind != RewardSubmission.Kind.OPERATOR_DIRECTED:
            continue
        first, last = paying_days(submission)
        for operator in submission.operator_amounts:
            out[(submission.pk, operator)] = sum(
                registrations.registered(operator, d) for d in day_range(first, last)
            )
    return out


@dataclass(frozen=True)
class _DayContext:
    day: date
    lat_day: LatDay
    avs_day: AvsDay
    registrations: Registrations
    splits: Splits

    def _keeps(self, operator: str) -> Decimal:
        """What the operator's stakers keep of its rewards: 1 - split."""
        split = self.splits.of(operator, self.day, self.avs_day.default_split)
        return (BIPS - split) / BIPS

    def avs_part(self, submission: RewardSubmission) -> Decimal:
        """The LAT's nodes' tokens of the day's payment of an AVS submission."""
        multipliers = _multipliers(submission)
        total = sum(
            (m * Decimal(self.avs_day.totals.get(s, 0)) for s, m in multipliers.items()),
            ZERO,
        )
        if not total:
            return ZERO
        paid = Decimal(submission.amount) * DAY / Decimal(submission.duration)
        earned = ZERO
        for operator, shares in self.lat_day.nodes:
            if not self.registrations.registered(operator, self.day):
                continue
            restaked = self.lat_day.operators.get(operator, {}).get("restaked")
            weight = sum(
                (
                    m * Decimal(shares.get(s, 0))
                    for s, m in multipliers.items()
                    if restaked is None or s in restaked
                ),
                ZERO,
            )
            earned += paid * weight / total * self._keeps(operator)
        return earned

    def directed_part(
        self, submission: RewardSubmission, registered_days: dict[tuple[int, str], int]
    ) -> Decimal:
        """The LAT's nodes' tokens of the day's payments of an operator-directed submission."""
        multipliers = _multipliers(submission)
        earned = ZERO
        for operator, amount in submission.operator_amounts.items():
            days = registered_days.get((submission.pk, operator), 0)
            own = [shares for op, shares in self.lat_day.nodes if op == operator]
            if not days or not own or not self.registrations.registered(operator, self.day):
                continue
            delegated = self.lat_day.operators.get(operator, {}).get("shares", {})
            total = sum((m * Decimal(delegated.get(s, 0)) for s, m in multipliers.items()), ZERO)
            if not total:
                continue
            weight = sum(
                (m * Decimal(shares.get(s, 0)) for shares in own for s, m in multipliers.items()),
                ZERO,
            )
            earned += Decimal(amount) / days * weight / total * self._keeps(operator)
        return earned


def _multipliers(submission: RewardSubmission) -> dict[str, Decimal]:
    return {
        s: Decimal(m) for s, m in zip(submission.strategies, submission.multipliers, strict=True)
    }


# --- windows ---------------------------------------------------------------------------------


def _percent(earned: Decimal, value: Decimal) -> Decimal:
    return 365 * earned / value * 100 if value else ZERO


def rewards_windows(earnings: Earnings, end: date) -> dict[str, Decimal | None]:
    """`apy` of each window ending with `end`, and avg30d: "0" (ZERO) without history, None
    where no day of it could be valued."""
    out: dict[str, Decimal | None] = {}
    for window, length in WINDOWS.items():
        chosen = [d for d in earnings.days if end - timedelta(days=length) < d.day <= end]
        valued = [(d.earned, d.value) for d in chosen if d.value is not None]
        if not chosen:
            out[window] = ZERO
        elif not valued:
            out[window] = None
        else:
            out[window] = _percent(
                sum((e for e, _ in valued), ZERO), sum((v for _, v in valued), ZERO)
            )
    recent = [d for d in earnings.days if end - timedelta(days=AVERAGED) < d.day <= end]
    daily = [_percent(d.earned, d.value) for d in recent if d.value]
    unknown = recent and all(d.value is None for d in recent)
    out["avg30d"] = None if unknown else (sum(daily, ZERO) / len(daily) if daily else ZERO)
    return out


def native_windows(lat: Lat, end: date) -> dict[str, Decimal | None]:
    """`nativeApy` of each window ending with `end`, and avg30d (see the module docstring)."""
    first = end - timedelta(days=max(WINDOWS.values()))
    t_end = day_start(end + timedelta(days=1))
    points = list(
        RatePoint.objects.filter(
            lat=lat,
            hour__gte=as_datetime(day_start(first) - HOUR),
            hour__lt=as_datetime(t_end),
        )
        .order_by("hour")
        .values_list("hour", "total_assets", "total_supply")
    )
    series = [(int(hour.timestamp()) + HOUR, exchange_rate(a, s)) for hour, a, s in points]
    if not series:
        return {window: ZERO for window in (*WINDOWS, "avg30d")}
    out: dict[str, Decimal | None] = {
        window: _growth(series, t_end - length * DAY, t_end) for window, length in WINDOWS.items()
    }
    daily = [
        _growth(series, day_start(d), day_start(d) + DAY, exact=True)
        for d in day_range(end - timedelta(days=AVERAGED - 1), end)
    ]
    known = [d for d in daily if d is not None]
    out["avg30d"] = sum(known, ZERO) / len(known) if known else ZERO
    return out


def _rate_at(series: Sequence[tuple[int, Decimal]], t: int) -> tuple[int, Decimal] | None:
    """The last point at or before time t (points are each hour's end)."""
    found = None
    for point in series:
        if point[0] > t:
            break
        found = point
    return found


def _growth(
    series: Sequence[tuple[int, Decimal]], start: int, end: int, *, exact: bool = False
) -> Decimal | None:
    """Simple annualised growth of the rate from `start` to `end`, percent: from the first
    point where history begins later (unless `exact`: then None)."""
    last = _rate_at(series, end)
    first = _rate_at(series, start)
    if first is None:
        if exact:
            return None
        first = series[0]
    if last is None or last[0] <= first[0] or not first[1]:
        return ZERO
    return (last[1] / first[1] - 1) * 365 * DAY / (last[0] - first[0]) * 100


# --- what is not counted ---------------------------------------------------------------------


def apy_gaps(lat: Lat, earnings: Earnings, first: date) -> list[str]:
    """What the rewards APY of the last year could not count, in words for ops."""
    gaps = []
    for token, days in sorted(earnings.unvalued.items()):
        gaps.append(
            f"rewards in token {token} paid on {len(set(days))} day(s) up to {max(days)} cannot "
            "be valued (the LAT holds no such token and no price feed is set for it: admin, "
            "Price feeds): not counted in apy"
        )
    noticed: dict[str, list[AvsEvent]] = defaultdict(list)
    for event in AvsEvent.objects.filter(
        avs_id=lat.avs_id, kind=AvsEvent.Kind.NOTICED, block_timestamp__gte=day_start(first)
    ):
        noticed[event.name].append(event)
    for name, events in sorted(noticed.items()):
        gaps.append(
            f"{len(events)} {name} since {first}: a kind of rewards submission the rewards APY "
            "does not count (EigenLayer pays it to other earners, or by operator sets)"
        )
    if not Registrations.of_avs(lat.avs_id):
        gaps.append(
            f"no operator has registered to AVS {lat.avs.address} (AVSDirectory): its AVS "
            "rewards reach no staker, and apy is 0"
        )
    return gaps
