"""Reads of a LAT's metrics: its TVL (from stored balances and node shares), its APY windows,
and its history (snapshots sampled at regular points)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from decimal import Decimal

from django.utils import timezone

from chain.results import block_time
from core.db import fetch_prepared
from core.errors import NotFound
from lats.models import Lat
from lats.selectors import (
    RECORD_COLUMNS,
    RECORD_FROM,
    RECORD_ORDER,
    RECORD_WIDTH,
    LatRecord,
    TokenLink,
    json_column,
    records_from_rows,
)
from lats.values import eth_at, unit_eth_price, whole_token
from metrics.apy import DEFAULT_SPLIT_BIPS, Splits
from metrics.days import paying_days
from metrics.models import (
    AvsDay,
    MetricSnapshot,
    RatePoint,
    RewardsCheckpoint,
    RewardSubmission,
    UsdPrice,
)
from metrics.timeline import day_start
from operators.models import OperatorAvsSplit, StakerNode

APY_WINDOWS = (
    "current",
    "avg30d",
    "trailing7d",
    "trailing30d",
    "trailing3m",
    "trailing6m",
    "trailing1y",
)
APY_FIELDS = ("apy", "baseApy", "nativeApy", "totalApy")

STEPS = {"1d": timedelta(days=1), "7d": timedelta(days=7)}
MAX_WINDOW = {"1d": timedelta(days=365), "7d": timedelta(days=720)}
DEFAULT_WINDOW = {"1d": timedelta(days=31), "7d": timedelta(days=365)}


@dataclass(frozen=True)
class HistoricalPoint:
    timestamp: datetime
    total_tvl_eth: Decimal | None
    staked_tvl_eth: Decimal | None
    unstaked_tvl_eth: Decimal | None
    apy: Decimal | None
    base_apy: Decimal
    native_apy: Decimal
    total_apy: Decimal | None
    total_users: int


def _points(start: datetime, end: datetime, step: timedelta) -> list[datetime]:
    """Period ends from `end` back to `start`, oldest first, `step` apart."""
    points = []
    point = end
    while point >= start:
        points.append(point)
        point -= step
    return points[::-1]


def lat_history(
    *, lat: Lat, frequency: str, variant: str, start: datetime, end: datetime
) -> list[HistoricalPoint]:
    """One point per period: the latest snapshot at or before the period's end.

    TVL and APY are levels, the same for both variants. `totalUsers` is the holders at the
    point (balance above zero, `cumulative`) or the addresses that became holders for the first
    time in the period (`discrete`). Points before the first snapshot are left out.
    """
    step = STEPS[frequency]
    points = _points(start, end, step)
    if not points:
        return []
    earliest = points[0] - step
    snapshots = list(
        MetricSnapshot.objects.filter(lat=lat, timestamp__gt=earliest, timestamp__lte=end).order_by(
            "timestamp"
        )
    )
    before = (
        MetricSnapshot.objects.filter(lat=lat, timestamp__lte=earliest)
        .order_by("-timestamp")
        .first()
    )
    out: list[HistoricalPoint] = []
    index = 0
    current = before
    previous_ever = before.ever_holders if before else 0
    for point in points:
        while index < len(snapshots) and snapshots[index].timestamp <= point:
            current = snapshots[index]
            index += 1
        if current is None:
            continue
        out.append(
            HistoricalPoint(
                timestamp=point,
                total_tvl_eth=current.total_tvl_eth,
                staked_tvl_eth=current.staked_tvl_eth,
                unstaked_tvl_eth=current.unstaked_tvl_eth,
                apy=current.apy,
                base_apy=current.base_apy,
                native_apy=current.native_apy,
                total_apy=current.total_apy,
                total_users=current.total_users
                if variant == "cumulative"
                else current.ever_holders - previous_ever,
            )
        )
        previous_ever = current.ever_holders
    return out


# --- TVL and APYs ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Tvl:
    """Values in ETH are None while the unit of account's ETH price is unknown (a token with
    no price feed yet); the amounts in tokens are known."""

    tvl: Decimal | None
    unstaked_tvl: Decimal | None
    staked_tvl: Decimal | None
    queued_tvl: Decimal | None
    tvl_assets: dict[str, Decimal] = field(default_factory=dict)
    tvl_assets_eth: dict[str, Decimal | None] = field(default_factory=dict)


def lat_tvl(*, lat: Lat | LatRecord, links: list[TokenLink]) -> Tvl:
    """TVL from stored balances and node shares (decisions.md, Values): each link's balances
    and what the LAT's nodes stake of its token (the sum the link keeps)."""
    unstaked_eth = staked_eth = queued_eth = Decimal(0)
    assets: dict[str, Decimal] = {}
    assets_eth: dict[str, Decimal | None] = {}
    price = unit_eth_price(lat)  # read once for every amount below (to_eth's)
    for link in links:
        symbol = link.symbol
        balance, queued, staked_amount = link.balance, link.queued_balance, link.staked_amount
        total = balance + queued + staked_amount
        assets[symbol] = total / whole_token(link.decimals)
        assets_eth[symbol] = eth_at(price, link, total)
        if price is not None:
            unstaked_eth += eth_at(price, link, balance)
            queued_eth += eth_at(price, link, queued)
            staked_eth += eth_at(price, link, staked_amount)
    if price is None:
        return Tvl(None, None, None, None, tvl_assets=assets, tvl_assets_eth=assets_eth)
    return Tvl(
        tvl=unstaked_eth + staked_eth + queued_eth,
        unstaked_tvl=unstaked_eth,
        staked_tvl=staked_eth,
        queued_tvl=queued_eth,
        tvl_assets=assets,
        tvl_assets_eth=assets_eth,
    )


def lat_apys(*, lat: Lat | LatRecord) -> dict[str, dict[str, str | None]]:
    """Stored APY windows, every window and member present ("0" where nothing is recorded
    yet; `apy` and `totalApy` null where the rewards APY is unknown: no RewardsCoordinator)."""
    stored = lat.apys or {}
    out: dict[str, dict[str, str | None]] = {}
    for window in APY_WINDOWS:
        values = stored.get(window) or {}
        out[window] = {name: _apy_text(values.get(name, "0")) for name in APY_FIELDS}
    return out


def _apy_text(value: object) -> str | None:
    return None if value is None else str(value)


def _number(value: Decimal | None) -> float | None:
    return None if value is None else float(value)


def tvl_document(tvl: Tvl) -> dict:
    return {
        "tvl": _number(tvl.tvl),
        "unstakedTvl": _number(tvl.unstaked_tvl),
        "stakedTvl": _number(tvl.staked_tvl),
        "queuedTvl": _number(tvl.queued_tvl),
        "tvlAssets": {k: float(v) for k, v in tvl.tvl_assets.items()},
        "tvlAssetsEth": {k: _number(v) for k, v in tvl.tvl_assets_eth.items()},
    }


# --- The LAT detail document's data in one statement -----------------------------------------

CURATED_FIELDS = (
    "metadataName",
    "metadataDescription",
    "metadataCommunityChat",
    "metadataLogo",
    "metadataMessaging",
    "metadataWebsite",
    "metadataSocial",
    "metadataCode",
    "metadataTokenAddress",
    "tags",
)
# The LAT record's columns (with what its nodes stake of each token: the sums the links keep,
# where summing the nodes' assets here cost the statement a third of its time), then the AVS's
# curated metadata (CURATED_FIELDS' order).
_DETAIL_SQL = f"""
SELECT {RECORD_COLUMNS},
    a.metadata_name, a.metadata_description, a.metadata_community_chat, a.metadata_logo,
    a.metadata_messaging, a.metadata_website, a.metadata_social, a.metadata_code,
    a.metadata_token_address, a.tags
FROM {RECORD_FROM}
WHERE l.proxy_address = %(address)s
ORDER BY {RECORD_ORDER}
"""


@dataclass(frozen=True)
class LatDetail:
    record: LatRecord  # its tokens with what the LAT's nodes stake of each
    curated_metadata: dict  # the `curatedMetadata` member of the LAT detail


def lat_detail(*, address: str) -> LatDetail:
    """The LAT at `address` with its tokens, what its nodes stake of each and its AVS's
    curated metadata (one statement)."""
    rows = fetch_prepared(_DETAIL_SQL, {"address": address})
    if not rows:
        raise NotFound(f"No LAT at {address}.")
    ((record, own),) = records_from_rows(rows)
    curated = dict(zip(CURATED_FIELDS, own[0][RECORD_WIDTH:], strict=True))
    curated["tags"] = json_column(curated["tags"])
    return LatDetail(
        record=record,
        curated_metadata={"avsAddress": record.avs_address, **curated},
    )


# --- rates --------------------------------------------------------------------------------

RATES_PAGE = 1_000
RATE_DECIMALS = 18


def rate_text(total_assets: Decimal | int, total_supply: Decimal | int) -> str:
    """Units of account per whole LAT, truncated to 18 decimals, as a decimal string (1 while
    the supply is zero)."""
    assets, supply = int(total_assets), int(total_supply)
    scaled = 10**RATE_DECIMALS if supply == 0 else assets * 10**RATE_DECIMALS // supply
    whole, fraction = divmod(scaled, 10**RATE_DECIMALS)
    text = f"{whole}.{fraction:0{RATE_DECIMALS}d}".rstrip("0")
    return text.removesuffix(".")


@dataclass(frozen=True)
class RatesPage:
    points: list[dict]
    next_after: int | None  # the last point's time, where more follow


def rate_page(
    *, lat: Lat, interval: str, start: datetime, end: datetime, after: int | None
) -> RatesPage:
    """The LAT's rate points whose interval starts within start..end (and after the Unix time
    `after`), oldest first, RATES_PAGE at most: one per hour, or one per UTC day (the day's last
    hour's point: the state at the day's last block)."""
    rows = RatePoint.objects.filter(lat=lat)
    shift = timedelta(hours=23) if interval == "day" else timedelta(0)
    if interval == "day":
        rows = rows.filter(hour__hour=23)
    rows = rows.filter(hour__gte=start + shift, hour__lte=end + shift)
    if after is not None:
        rows = rows.filter(hour__gt=block_time(after) + shift)
    found = list(
        rows.order_by("hour").values_list("hour", "block_number", "total_assets", "total_supply")[
            : RATES_PAGE + 1
        ]
    )
    page = found[:RATES_PAGE]
    points = [
        {
            "timestamp": hour - shift,
            "blockNumber": block,
            "rate": rate_text(assets, supply),
            "totalAssets": str(int(assets)),
            "totalSupply": str(int(supply)),
        }
        for hour, block, assets, supply in page
    ]
    more = len(found) > RATES_PAGE
    return RatesPage(points, int((page[-1][0] - shift).timestamp()) if more else None)


# --- what the yields listing reads -----------------------------------------------------------


def reward_tokens(*, avs_ids: set[int], first: date, last: date) -> dict[int, list[str]]:
    """AVS id -> the tokens of its counted submissions paying on any day of first..last."""
    out: dict[int, set[str]] = {avs_id: set() for avs_id in avs_ids}
    for submission in RewardSubmission.objects.filter(
        avs_id__in=avs_ids, start_timestamp__lt=day_start(last), duration__gt=0
    ):
        if paying_days(submission)[1] >= first:
            out[submission.avs_id].add(submission.token)
    return {avs_id: sorted(tokens) for avs_id, tokens in out.items()}


def usd_prices() -> dict[int, Decimal]:
    """chain id -> ETH's price in USD, where a feed gave one."""
    return {
        row.chain_id: Decimal(row.answer) / Decimal(10) ** row.decimals
        for row in UsdPrice.objects.all()
        if row.answer
    }


# --- the average operator fee ------------------------------------------------------------------


def lat_avg_operator_fee(*, lat: Lat | LatRecord, day: date | None = None) -> Decimal | None:
    """The mean split (percent) for the LAT's AVS of the operators its nodes delegate to, in
    force on `day` (today by default) as the rewards APY counts it (metrics/apy.py, `Splits`:
    the operator's own from the UTC day after its activatedAt, else the coordinator's default,
    else 10 %); 0 with no operator; None where the chain's RewardsCoordinator is unknown. Until
    the AVS's events were first read, the splits the state job read (`getOperatorAVSSplit`)."""
    operators = dict(
        StakerNode.objects.filter(lat_id=lat.id, operator__isnull=False)
        .values_list("operator_id", "operator__address")
        .distinct()
    )
    if not operators:
        return Decimal(0)
    full = lat if isinstance(lat, Lat) else Lat.objects.get(pk=lat.id)
    if not full.core_contract("rewardsCoordinator"):
        return None
    if not RewardsCheckpoint.objects.filter(avs_id=full.avs_id).exists():
        stored = dict(
            OperatorAvsSplit.objects.filter(
                operator_id__in=operators, avs_id=full.avs_id
            ).values_list("operator_id", "split_bips")
        )
        bips = [stored.get(op, DEFAULT_SPLIT_BIPS) for op in operators]
    else:
        day = day or timezone.now().date()
        splits = Splits.of_avs(full.avs_id)
        latest = AvsDay.objects.filter(avs_id=full.avs_id, day__lte=day).order_by("-day").first()
        default = None if latest is None else latest.default_split
        bips = [splits.of(address, day, default) for address in operators.values()]
    return Decimal(sum(bips)) / len(bips) / 100
