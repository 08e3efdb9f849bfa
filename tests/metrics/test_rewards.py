"""The rewards APY's arithmetic (decisions.md, "Rewards APY"; metrics/apy.py) on days written by
hand: registrations that count from the next day and a deregistration that takes its day, an
operator's split that changes mid-window, the default split, restaked strategies, an AVS and an
operator-directed submission, a token that cannot be valued and a kind of submission not counted.
Every expected figure is worked out by hand in the comments. The same arithmetic against the
chain, from what web3 reads: tests/metrics/test_rewards_chain.py."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from lats.models import Lat
from metrics.models import AvsDay, AvsEvent, LatDay, RewardSubmission
from metrics.services import snapshot_record
from tests import factories as f

pytestmark = pytest.mark.django_db

A = f.address
DAY = 86400
D0 = dt.date(2026, 6, 1)
D1, D2, D3 = (D0 + dt.timedelta(days=n) for n in (1, 2, 3))
NOW = dt.datetime(2026, 6, 5, 9, tzinfo=dt.UTC)  # D3 is the last complete day
S1, S2 = A(0x5001), A(0x5002)  # the eLAT's stETH and USDx strategies
OP1, OP2, OP3 = A(0x901), A(0x902), A(0x903)
WAD = 10**18
TVL = Decimal(5000)  # V(d), ETH, every day


def at(day: dt.date, hour: int = 0) -> int:
    return int(dt.datetime(day.year, day.month, day.day, hour, tzinfo=dt.UTC).timestamp())


def event(dataset, kind, n, *, time, operator="", value=0, activated_at=0, name=""):
    return AvsEvent.objects.create(
        avs=dataset.avs,
        kind=kind,
        name=name or kind,
        chain_id=31337,
        tx_hash=f"0x{n:064x}",
        log_index=0,
        block_number=n,
        block_hash=f"0x{n:064x}",
        block_timestamp=time,
        operator=operator,
        value=value,
        activated_at=activated_at,
    )


def submission(dataset, n, *, token, amount=0, operator_amounts=None, multipliers):
    kinds = RewardSubmission.Kind
    kind = kinds.OPERATOR_DIRECTED if operator_amounts else kinds.AVS
    return RewardSubmission.objects.create(
        avs=dataset.avs,
        kind=kind,
        chain_id=31337,
        tx_hash=f"0x{n:064x}",
        log_index=1,
        block_number=n,
        block_hash=f"0x{n:064x}",
        token=token,
        amount=amount or sum(int(v) for v in operator_amounts.values()),
        operator_amounts=operator_amounts or {},
        start_timestamp=at(D0),  # pays D1, D2, D3
        duration=3 * DAY,
        strategies=list(multipliers),
        multipliers=[str(m) for m in multipliers.values()],
    )


@pytest.fixture
def history(dataset):
    """Three days of an AVS with three operators; the eLAT has node A (operator 1) and node B
    (operator 2)."""
    # The registrations are the AVSDirectory's: a devnet names it (chain 31337 has no preset).
    Lat.objects.filter(pk=dataset.eth_lat.pk).update(avs_directory=A(0xD0))
    reg = AvsEvent.Kind.REGISTRATION
    event(dataset, reg, 1, time=at(D0, 10), operator=OP1, value=1)  # counts from D1
    event(dataset, reg, 2, time=at(D0, 11), operator=OP3, value=1)
    event(dataset, reg, 3, time=at(D1, 12), operator=OP2, value=1)  # counts from D2
    event(dataset, reg, 4, time=at(D2, 15), operator=OP3, value=0)  # not on D2 any more
    split = AvsEvent.Kind.SPLIT
    event(dataset, split, 5, time=at(D0, 9), operator=OP1, value=500, activated_at=at(D0, 9))
    event(dataset, split, 6, time=at(D1, 18), operator=OP1, value=2000, activated_at=at(D1, 18))
    # Operator 2 sets none: the coordinator's default as the day's state read it (1,500 bips).
    steth = dataset.steth.address
    # 300 stETH over D1..D3 (100 a day) to S1 (x1) and S2 (x2).
    submission(dataset, 10, token=steth, amount=300 * WAD, multipliers={S1: 1, S2: 2})
    # Operator-directed, S1 (x1): 60 stETH to operator 1 (registered all 3 days: 20 a day), 30
    # to operator 2 (registered on D2 and D3 only: 15 a day).
    submission(
        dataset,
        11,
        token=steth,
        operator_amounts={OP1: str(60 * WAD), OP2: str(30 * WAD)},
        multipliers={S1: 1},
    )
    # In a token nothing values: not counted, named in the gaps.
    submission(dataset, 12, token=A(0xABC), amount=10**24, multipliers={S1: 1})
    event(
        dataset,
        AvsEvent.Kind.NOTICED,
        13,
        time=at(D2, 3),
        name="RewardsSubmissionForAllCreated",
    )
    # The AVS's days: D1 counts operators 1 and 3 (S1 100 + 300, S2 50 + 0); D2 and D3
    # operators 1 and 2 (operator 2 restakes S1 only: S1 100 + 40, S2 50).
    totals = {D1: {S1: 400, S2: 50}, D2: {S1: 140, S2: 50}, D3: {S1: 140, S2: 50}}
    for n, (day, values) in enumerate(totals.items()):
        AvsDay.objects.create(
            avs=dataset.avs,
            day=day,
            block_number=100 + n,
            block_hash="0x" + "1" * 64,
            strategies=[S1, S2],
            totals={s: str(v * WAD) for s, v in values.items()},
            operators=2,
            default_split=1500,
        )
        LatDay.objects.create(
            lat=dataset.eth_lat,
            day=day,
            block_number=100 + n,
            block_hash="0x" + "1" * 64,
            total_assets=1,
            total_supply=1,
            tvl_eth=TVL,
            strategies=[S1, S2],
            nodes=[[OP1, {S1: str(10 * WAD), S2: str(5 * WAD)}], [OP2, {S1: str(20 * WAD)}]],
            operators={
                OP1: {"shares": {S1: str(100 * WAD), S2: str(50 * WAD)}, "restaked": None},
                OP2: {"shares": {S1: str(40 * WAD), S2: "0"}, "restaked": [S1]},
            },
            prices={steth: "1E-18", A(0xABC): None},  # stETH: 1 ETH a token
        )
    return dataset


# Day by day (tokens = ETH here):
# D1, AVS: W = 400 + 2 x 50 = 500; node A: w = 10 + 2 x 5 = 20 -> 100 x 20/500 x 0.95 = 3.8;
#     node B: operator 2 not registered yet.
#     operator-directed: operator 1, W_o = 100 -> 20 x 10/100 x 0.95 = 1.9.    E(D1) = 5.7
# D2, AVS: W = 140 + 2 x 50 = 240; node A: 100 x 20/240 x 0.80 = 6.6666...;
#     node B (S1 only): 100 x 20/240 x 0.85 = 7.0833...
#     operator-directed: node A 20 x 10/100 x 0.80 = 1.6; node B 15 x 20/40 x 0.85 = 6.375.
#     E(D2) = 6.6666... + 7.0833... + 1.6 + 6.375 = 21.725                       E(D3) the same
E = {D1: Decimal("5.7"), D2: Decimal("21.725"), D3: Decimal("21.725")}


def percent(earned: Decimal, value: Decimal) -> Decimal:
    return 365 * earned / value * 100


def fmt(value: Decimal) -> str:
    return format(value.quantize(Decimal("0.0001")).normalize(), "f")


def test_every_window_as_computed_by_hand(history):
    snapshot_record(lat=history.eth_lat, at=NOW)
    apys = Lat.objects.get(pk=history.eth_lat.pk).apys
    assert apys["current"]["apy"] == fmt(percent(E[D3], TVL)) == "158.5925"
    three_days = percent(sum(E.values()), 3 * TVL)
    for window in ("trailing7d", "trailing30d", "trailing3m", "trailing6m", "trailing1y"):
        assert apys[window]["apy"] == fmt(three_days), window  # the days there are
    assert apys["avg30d"]["apy"] == fmt(sum(percent(e, TVL) for e in E.values()) / 3)
    for values in apys.values():
        assert values["totalApy"] == values["apy"]  # no base yield set


def test_the_gaps_name_what_is_not_counted(history):
    snapshot_record(lat=history.eth_lat, at=NOW)
    gaps = Lat.objects.get(pk=history.eth_lat.pk).apy_gaps
    assert len(gaps) == 2
    assert gaps[0].startswith(f"rewards in token {A(0xABC)} paid on 3 day(s) up to {D3}")
    assert gaps[1].startswith("1 RewardsSubmissionForAllCreated since")


def test_a_day_the_avs_has_not_read_is_not_counted(history):
    AvsDay.objects.filter(day=D3).delete()
    snapshot_record(lat=history.eth_lat, at=NOW)
    apys = Lat.objects.get(pk=history.eth_lat.pk).apys
    assert apys["current"]["apy"] == "0"  # D3 has no data yet
    assert apys["trailing7d"]["apy"] == fmt(percent(E[D1] + E[D2], 2 * TVL))


def test_without_registrations_the_avs_rewards_reach_no_one(history):
    AvsEvent.objects.filter(kind=AvsEvent.Kind.REGISTRATION).delete()
    snapshot_record(lat=history.eth_lat, at=NOW)
    lat = Lat.objects.get(pk=history.eth_lat.pk)
    assert {values["apy"] for values in lat.apys.values()} == {"0"}
    assert lat.apy_gaps[-1].startswith(f"no operator has registered to AVS {history.avs.address}")


def test_a_lat_without_days_has_an_apy_of_zero(dataset):
    Lat.objects.filter(pk=dataset.native_lat.pk).update(avs_directory=A(0xD0))
    snapshot_record(lat=dataset.native_lat, at=NOW)
    apys = Lat.objects.get(pk=dataset.native_lat.pk).apys
    assert {values["apy"] for values in apys.values()} == {"0"}
    assert {values["nativeApy"] for values in apys.values()} == {"0"}


def test_base_and_total(history):
    history.steth.base_apy = 3
    history.steth.save()
    snapshot_record(lat=history.eth_lat, at=NOW)
    apys = Lat.objects.get(pk=history.eth_lat.pk).apys
    # baseApy: stETH's 3 % weighted by its 20 ETH of the 21.5 ETH TVL = 2.7907 %.
    assert apys["current"]["baseApy"] == "2.7907"
    assert Decimal(apys["current"]["totalApy"]) == Decimal(apys["current"]["apy"]) + Decimal(
        "2.7907"
    )
