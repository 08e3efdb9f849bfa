"""Writes of metric snapshots and the APY windows derived from them."""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from decimal import Context, Decimal

from django.db import transaction
from django.utils import timezone
from eth_utils import to_checksum_address

from activity.indexing import Checkpoint, Rewind, index_ranges, index_start
from chain.gateway import Gateway, gateway_for
from core.api.documents import documents_changed
from core.db import model_update
from core.locks import advisory_lock
from deposits.models import HolderTally
from lats.models import Lat, PriceFeed, SyncStatus, Token
from lats.selectors import token_links
from lats.sync_status import sync_status_recording, sync_status_success
from lats.values import WAD_DECIMAL, exchange_rate, to_eth
from metrics.models import MetricSnapshot, RewardsCheckpoint, RewardSubmission
from metrics.selectors import APY_WINDOWS, lat_tvl

logger = logging.getLogger(__name__)

WINDOWS = {
    "current": timedelta(days=1),
    "trailing7d": timedelta(days=7),
    "trailing30d": timedelta(days=30),
    "trailing3m": timedelta(days=91),
    "trailing6m": timedelta(days=182),
    "trailing1y": timedelta(days=365),
}
YEAR = Decimal(365 * 86400)


def _native_apy(now: datetime, rate_now: Decimal, then: MetricSnapshot | None) -> Decimal:
    """Annualised growth of the exchange rate since `then` (simple, percent)."""
    if then is None:
        return Decimal(0)
    elapsed = Decimal((now - then.timestamp).total_seconds())
    rate_then = exchange_rate(then.total_assets, then.total_supply)
    if elapsed <= 0 or not rate_then:
        return Decimal(0)
    return (rate_now / rate_then - 1) * YEAR / elapsed * 100


def _base_apy(links, tvl) -> Decimal:
    """TVL-weighted staking yield of the LAT's tokens (Token.base_apy, set in admin). While the
    unit of account's ETH price is unknown the weights are the tokens' values in the unit of
    account: the same ratios, the ETH price being a factor common to every token of the LAT."""
    if tvl.tvl is None:
        weights = {
            link.symbol: tvl.tvl_assets.get(link.symbol, Decimal(0))
            * Decimal(link.price_per_unit)
            / WAD_DECIMAL
            for link in links
        }
    else:
        weights = {symbol: value or Decimal(0) for symbol, value in tvl.tvl_assets_eth.items()}
    total = sum(weights.values(), Decimal(0))
    if not total:
        return Decimal(0)
    weighted = Decimal(0)
    for link in links:
        weighted += weights.get(link.symbol, Decimal(0)) * link.base_apy
    return weighted / total


# Quantizing needs room for every digit: the default context's 28 would fail on a TVL above
# 10**10 ETH at 18 decimals (InvalidOperation) rather than store it.
_WIDE = Context(prec=78)


def _eth(value: Decimal) -> Decimal:
    """At the scale of the snapshot's TVL columns, so that equal values compare equal."""
    return value.quantize(Decimal(10) ** -18, context=_WIDE)


def _eth_or_null(value: Decimal | None) -> Decimal | None:
    return None if value is None else _eth(value)


def _pct(value: Decimal) -> Decimal:
    return value.quantize(Decimal(10) ** -8, context=_WIDE)


def _pct_or_null(value: str | None) -> Decimal | None:
    return None if value is None else _pct(Decimal(value))


def _fmt(value: Decimal) -> str:
    return format(value.quantize(Decimal("0.0001")).normalize(), "f")


def _fmt_or_null(value: Decimal | None) -> str | None:
    return None if value is None else _fmt(value)


def _submissions(
    *, lat: Lat, links, until: datetime
) -> list[tuple[RewardSubmission, Decimal | None]]:
    """The AVS's reward submissions to any of the LAT's strategies that started by `until`,
    each with its amount in ETH (valued once, for every window)."""
    strategies = {link.strategy_address for link in links}
    return [
        (submission, _reward_eth(lat, links, submission))
        for submission in RewardSubmission.objects.filter(
            avs_id=lat.avs_id, start_timestamp__lte=int(until.timestamp())
        )
        if strategies.intersection(submission.strategies)
    ]


def _reward_eth(lat: Lat, links, submission: RewardSubmission) -> Decimal | None:
    """The submission's amount in ETH: through the LAT's own price of the token, else the
    token's price feed; a token with neither is not counted."""
    link = next((link for link in links if link.address == submission.token), None)
    if link is not None:
        return to_eth(lat, link, Decimal(submission.amount))
    feed = PriceFeed.objects.filter(chain_id=lat.chain_id, token_address=submission.token).first()
    token = Token.objects.filter(chain_id=lat.chain_id, address=submission.token).first()
    if feed is None or token is None or not feed.answer:
        return Decimal(0)
    whole = Decimal(submission.amount) / (Decimal(10) ** token.decimals)
    return whole * Decimal(feed.answer) / (Decimal(10) ** feed.decimals)


def _rewards_apy(
    submissions: list[tuple[RewardSubmission, Decimal | None]],
    stake_eth: Decimal | None,
    *,
    now: datetime,
    span: timedelta,
) -> Decimal | None:
    """AVS rewards APY of the LAT's stake over the window (now - span, now], percent.

    A submission pays its amount evenly over [start, start + duration]; the part that falls in
    the window, valued in ETH, is annualised and divided by the ETH value of the LAT's staked
    assets. All of a submission to the LAT's strategies counts for the LAT: exact when its
    nodes are the AVS's only stakers in those strategies, an upper bound otherwise. None while
    the stake's ETH value is unknown (a unit of account without a price feed).
    """
    if stake_eth is None:
        return None
    if not stake_eth:
        return Decimal(0)
    end = int(now.timestamp())
    start = end - int(span.total_seconds())
    earned = Decimal(0)
    for submission, amount_eth in submissions:
        paid_from = submission.start_timestamp
        paid_to = submission.start_timestamp + submission.duration
        overlap = min(paid_to, end) - max(paid_from, start)
        if overlap <= 0 or not submission.duration:
            continue
        earned += (amount_eth or Decimal(0)) * overlap / submission.duration
    return earned * YEAR / Decimal(end - start) / stake_eth * 100


@dataclass(frozen=True)
class RewardsSummary:
    new: int
    removed: int  # orphaned by a reorg
    block: int  # the confirmed head read up to
    at: datetime  # the time of that block: the snapshot's "now"


def _stored_blocks(lat: Lat):
    def stored(lowest: int, highest: int) -> list[tuple[int, str]]:
        return list(
            RewardSubmission.objects.filter(
                avs_id=lat.avs_id, block_number__gte=lowest, block_number__lte=highest
            )
            .order_by("-block_number")
            .values_list("block_number", "block_hash")
            .distinct()
        )

    return stored


def _checkpoint(lat: Lat) -> Checkpoint | None:
    row = RewardsCheckpoint.objects.filter(avs_id=lat.avs_id).first()
    if row is None:
        return None
    return Checkpoint(row.block_number, row.block_hash, row.final_block, row.final_hash)


@transaction.atomic
def rewards_rewind(lat: Lat, rewind: Rewind) -> int:
    """Remove the submissions a reorg orphaned and move the checkpoint back to the fork."""
    removed, _ = RewardSubmission.objects.filter(
        avs_id=lat.avs_id, block_number__gt=rewind.fork
    ).delete()
    if rewind.checkpoint is None:
        RewardsCheckpoint.objects.filter(avs_id=lat.avs_id).delete()
    else:
        RewardsCheckpoint.objects.filter(avs_id=lat.avs_id).update(**rewind.checkpoint.fields())
    return removed


def _store_submissions(lat: Lat, logs) -> int:
    new = 0
    for log in logs:
        strategies, token, amount, start_timestamp, duration = log.values[3]
        _, created = RewardSubmission.objects.get_or_create(
            chain_id=lat.chain_id,
            tx_hash=log.tx_hash,
            log_index=log.log_index,
            defaults={
                "avs_id": lat.avs_id,
                "block_number": log.block_number,
                "block_hash": log.block_hash,
                "token": to_checksum_address(token),
                "amount": amount,
                "start_timestamp": start_timestamp,
                "duration": duration,
                "strategies": [to_checksum_address(s) for s, _ in strategies],
            },
        )
        new += created
    return new


def rewards_index(*, lat: Lat, gateway: Gateway | None = None) -> RewardsSummary:
    """Store the AVS's AVSRewardsSubmissionCreated events since its checkpoint, with the same
    checks of the node, reorgs and consistency as the deposits (activity/indexing.py). Running
    twice adds nothing. The time of the block it read up to is returned for the snapshot, so
    that metrics are those of the chain's state, not of the clock (a second sync over the same
    blocks writes nothing).

    The submissions and checkpoint are the AVS's, which several LATs may share: one job at a
    time indexes them (an advisory lock per AVS). While another LAT's job holds it, this one
    writes nothing and its snapshot reads the submissions stored so far."""
    gateway = gateway or gateway_for(lat.chain_id)
    with advisory_lock(REWARDS_LOCK, lat.avs_id) as held:
        return _rewards_index(lat=lat, gateway=gateway, write=held)


REWARDS_LOCK = "metrics.rewards_index"


def _rewards_index(*, lat: Lat, gateway: Gateway, write: bool) -> RewardsSummary:
    coordinator = lat.core_contract("rewardsCoordinator")
    start = index_start(
        lat=lat,
        gateway=gateway,
        checkpoint=_checkpoint(lat) if coordinator else None,
        origin=lat.deployment_block,
        stored_blocks=_stored_blocks(lat),
    )
    summary = RewardsSummary(
        new=0,
        removed=rewards_rewind(lat, start.rewind) if start.rewind and write else 0,
        block=start.head.number,
        at=start.head.time,
    )
    if not write:
        logger.info("Reward submissions of AVS %s: another LAT's job is indexing them", lat.avs_id)
        return summary
    if not coordinator:
        return summary
    avs_topic = "0x" + "0" * 24 + lat.avs.address[2:].lower()

    def fetch(first_block: int, last_block: int):
        return gateway.event_logs(
            contract="RewardsCoordinator",
            name="AVSRewardsSubmissionCreated",
            address=coordinator,
            topics=[avs_topic],
            from_block=first_block,
            to_block=last_block,
        )

    new = 0
    for read in index_ranges(
        lat=lat, gateway=gateway, start=start, origin=lat.deployment_block, fetch=fetch
    ):
        with transaction.atomic():
            new += _store_submissions(lat, read.logs)
            RewardsCheckpoint.objects.update_or_create(
                avs_id=lat.avs_id, defaults=read.checkpoint.fields()
            )
    return replace(summary, new=new)


def metrics_refresh(*, lat: Lat, gateway: Gateway | None = None) -> MetricSnapshot:
    """The snapshot job: index the AVS's reward submissions, then record the LAT's metrics at
    the block read up to. Any failure is recorded on the LAT's `snapshot` sync status."""
    with sync_status_recording(lat=lat, job=SyncStatus.Job.SNAPSHOT):
        rewards = rewards_index(lat=lat, gateway=gateway)
        snapshot = snapshot_record(lat=lat, at=rewards.at)
    sync_status_success(lat=lat, job=SyncStatus.Job.SNAPSHOT, block=rewards.block)
    return snapshot


def _avg30d(lat: Lat, now: datetime, base: Decimal, rewards_known: bool) -> dict[str, str | None]:
    """The mean of the last 30 daily values (each day's last snapshot); the rewards APY (and
    the total) null where the RewardsCoordinator is unknown, over the days that have one."""
    per_day: dict = {}
    for timestamp, native, rewards in (
        MetricSnapshot.objects.filter(lat=lat, timestamp__gte=now - timedelta(days=30))
        .order_by("timestamp")
        .values_list("timestamp", "native_apy", "apy")
    ):
        per_day[timestamp.date()] = (native, rewards)
    daily = list(per_day.values())

    def mean(index: int) -> Decimal:
        values = [d[index] for d in daily if d[index] is not None]
        return sum(values, Decimal(0)) / len(values) if values else Decimal(0)

    # Unknown where no coordinator is known, or where every day's was unknown (a unit of
    # account without a price feed); "0" with too little history, as every window.
    unknown = not rewards_known or (daily and all(d[1] is None for d in daily))
    rewards = None if unknown else mean(1)
    return {
        "apy": _fmt_or_null(rewards),
        "baseApy": _fmt(base),
        "nativeApy": _fmt(mean(0)),
        "totalApy": _fmt_or_null(None if rewards is None else rewards + base),
    }


@transaction.atomic
def snapshot_record(*, lat: Lat, at: datetime | None = None) -> MetricSnapshot:
    """Record the LAT's metrics now (one snapshot an hour, the latest wins) and its APY windows
    (decisions.md, Values): `nativeApy` from the exchange rate's growth, `baseApy` from the
    tokens' own yield, `apy` from the AVS rewards submitted to the LAT's strategies (see
    `_rewards_apy`), `totalApy` = `apy` + `baseApy`."""
    now = at or timezone.now()
    hour = now.replace(minute=0, second=0, microsecond=0)
    lat = Lat.objects.get(pk=lat.pk)
    links = token_links(lat_ids=[lat.id]).get(lat.id, [])
    tvl = lat_tvl(lat=lat, links=links)
    rate_now = exchange_rate(lat.total_assets, lat.total_supply)
    history = MetricSnapshot.objects.filter(lat=lat).exclude(timestamp=hour)
    apys: dict[str, dict[str, str | None]] = {}
    base = _base_apy(links, tvl)
    submissions = _submissions(lat=lat, links=links, until=now)
    # Without a RewardsCoordinator no submission can be read: the rewards APY is unknown, not 0.
    rewards_known = bool(lat.core_contract("rewardsCoordinator"))
    for window, span in WINDOWS.items():
        then = history.filter(timestamp__gte=now - span).order_by("timestamp").first()
        native = _native_apy(now, rate_now, then)
        rewards = (
            _rewards_apy(submissions, tvl.staked_tvl, now=now, span=span) if rewards_known else None
        )
        apys[window] = {
            "apy": _fmt_or_null(rewards),
            "baseApy": _fmt(base),
            "nativeApy": _fmt(native),
            "totalApy": _fmt_or_null(None if rewards is None else rewards + base),
        }
    holders, ever = HolderTally.objects.filter(lat=lat).values_list("holders", "ever").first() or (
        0,
        0,
    )
    values = {
        "block_number": lat.state_block or 0,
        "total_assets": lat.total_assets,
        "total_supply": lat.total_supply,
        "total_tvl_eth": _eth_or_null(tvl.tvl),
        "staked_tvl_eth": _eth_or_null(tvl.staked_tvl),
        "unstaked_tvl_eth": None
        if tvl.unstaked_tvl is None or tvl.queued_tvl is None
        else _eth(tvl.unstaked_tvl + tvl.queued_tvl),
        "apy": _pct_or_null(apys["current"]["apy"]),
        "base_apy": _pct(base),
        "native_apy": _pct(Decimal(str(apys["current"]["nativeApy"]))),
        "total_apy": _pct_or_null(apys["current"]["totalApy"]),
        "total_users": holders,
        "ever_holders": ever,
    }
    snapshot = MetricSnapshot.objects.filter(lat=lat, timestamp=hour).first()
    if snapshot is None:
        snapshot = MetricSnapshot.objects.create(lat=lat, timestamp=hour, **values)
    else:
        model_update(snapshot, values)
    apys["avg30d"] = _avg30d(lat, now, base, rewards_known)
    ordered = {w: apys[w] for w in APY_WINDOWS}
    if lat.apys != ordered:
        Lat.objects.filter(pk=lat.pk).update(apys=ordered)
        documents_changed()  # update() sends no signal
    return snapshot
