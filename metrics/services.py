"""The snapshot job: the events and days the rewards APY reads, the hourly rates, and the
LAT's metric snapshot with its APY windows."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import date, datetime, timedelta
from decimal import Context, Decimal

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from chain.gateway import Gateway, gateway_for
from chain.results import Block
from core.api.documents import documents_changed
from core.db import model_update
from deposits.models import HolderTally
from lats.models import Lat, SyncStatus
from lats.networks import ETH_USD_FEEDS
from lats.selectors import token_links
from lats.sync_status import sync_status_recording, sync_status_success
from lats.values import WAD_DECIMAL
from metrics.apy import apy_gaps, lat_earnings, native_windows, rewards_windows
from metrics.avs import avs_index
from metrics.days import KEEP_DAYS, DaysRead, avs_days_update, lat_days_update
from metrics.models import MetricSnapshot, UsdPrice
from metrics.rates import rates_update
from metrics.selectors import APY_WINDOWS, lat_tvl
from metrics.timeline import day_range, last_complete_day

logger = logging.getLogger(__name__)


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


def metrics_refresh(*, lat: Lat, gateway: Gateway | None = None) -> MetricSnapshot:
    """The snapshot job: the AVS's events and days (metrics/avs.py, metrics/days.py), the LAT's
    days and hourly rates (metrics/rates.py), ETH's USD price on the chain, then the LAT's
    metrics and APY windows at the confirmed head. Any failure is recorded on the LAT's
    `snapshot` sync status."""
    with sync_status_recording(lat=lat, job=SyncStatus.Job.SNAPSHOT):
        gateway = gateway or gateway_for(lat.chain_id)

        days: list[DaysRead] = []

        def avs_days(head: Block) -> None:
            days.append(avs_days_update(lat=lat, gateway=gateway, head=head))

        head = avs_index(lat=lat, gateway=gateway, then=avs_days).head
        if rewards_readable(lat):
            days.append(lat_days_update(lat=lat, gateway=gateway, head=head))
        points = rates_update(lat=lat, gateway=gateway, head=head)
        usd_price_update(chain_id=lat.chain_id, gateway=gateway, block=head)
        if points or any(days):
            documents_changed()  # days and rate points are written in bulk: no model signal
        unread = sorted({day for read in days for day in read.unread})
        snapshot = snapshot_record(lat=lat, at=head.time, unread=unread)
    sync_status_success(lat=lat, job=SyncStatus.Job.SNAPSHOT, block=head.number)
    return snapshot


def rewards_readable(lat: Lat) -> bool:
    """Whether the rewards APY can be known: the RewardsCoordinator (submissions, splits) and
    the AVSDirectory (registrations) are named (else `apy` is null, and the gaps say why)."""
    return bool(lat.core_contract("rewardsCoordinator") and lat.core_contract("avsDirectory"))


def usd_price_update(*, chain_id: int, gateway: Gateway, block: Block) -> None:
    """ETH's USD price on the chain from its ETH/USD feed (ETH_USD_FEED_<chainId>, else the
    network's known one), at `block`; none where no feed is known. Writes only a change."""
    feed = settings.ETH_USD_FEEDS.get(chain_id) or ETH_USD_FEEDS.get(chain_id)
    row = UsdPrice.objects.filter(chain_id=chain_id).first()
    if not feed:
        if row is not None:
            row.delete()
        return
    answer, decimals = gateway.price_feed(feed=feed, block=block)
    values = {"feed_address": feed, "answer": answer, "decimals": decimals}
    if row is None:
        UsdPrice.objects.create(
            chain_id=chain_id, block_number=block.number, updated_at=timezone.now(), **values
        )
        return
    row.block_number, row.updated_at = block.number, timezone.now()
    model_update(row, values, also=("block_number", "updated_at"))


def _windows(lat: Lat, links, tvl, now: datetime, unread: Sequence[date]) -> tuple[dict, list[str]]:
    """The APY windows (decisions.md, Values; metrics/apy.py) and the rewards APY's gaps."""
    end = last_complete_day(int(now.timestamp()))
    base = _base_apy(links, tvl)
    native = native_windows(lat, end)
    known = rewards_readable(lat)
    rewards: dict[str, Decimal | None] = dict.fromkeys(native)
    gaps: list[str] = []
    if known:
        days = day_range(end - timedelta(days=KEEP_DAYS - 1), end)
        earnings = lat_earnings(lat, days)
        rewards = rewards_windows(earnings, end)
        gaps = apy_gaps(lat, earnings, days[0])
        if unread:
            gaps.append(
                f"{len(unread)} day(s) from {unread[0]} to {unread[-1]} could not be read: the "
                "node keeps no state that old (an archive node reads a LAT's history); apy "
                "counts the days read"
            )
    apys = {}
    for window in APY_WINDOWS:
        reward = rewards[window]
        apys[window] = {
            "apy": _fmt_or_null(reward),
            "baseApy": _fmt(base),
            "nativeApy": _fmt(native[window] or Decimal(0)),
            "totalApy": _fmt_or_null(None if reward is None else reward + base),
        }
    return apys, gaps


@transaction.atomic
def snapshot_record(
    *, lat: Lat, at: datetime | None = None, unread: Sequence[date] = ()
) -> MetricSnapshot:
    """Record the LAT's metrics at `at` (one snapshot an hour, the latest wins) and its APY
    windows (decisions.md, Values; metrics/apy.py): `nativeApy` from the exchange rate's
    growth, `baseApy` from the tokens' own yield, `apy` as EigenLayer splits the AVS's rewards,
    `totalApy` = `apy` + `baseApy`, each over whole UTC days ending with the last complete one.
    The snapshot carries the `current` window; `unread` are the days whose state the node did
    not keep (named in the gaps)."""
    now = at or timezone.now()
    hour = now.replace(minute=0, second=0, microsecond=0)
    lat = Lat.objects.get(pk=lat.pk)
    links = token_links(lat_ids=[lat.id]).get(lat.id, [])
    tvl = lat_tvl(lat=lat, links=links)
    apys, gaps = _windows(lat, links, tvl, now, unread)
    holders, ever = HolderTally.objects.filter(lat=lat).values_list("holders", "ever").first() or (
        0,
        0,
    )
    current = apys["current"]
    values = {
        "block_number": lat.state_block or 0,
        "total_assets": lat.total_assets,
        "total_supply": lat.total_supply,
        "total_tvl_eth": _eth_or_null(tvl.tvl),
        "staked_tvl_eth": _eth_or_null(tvl.staked_tvl),
        "unstaked_tvl_eth": None
        if tvl.unstaked_tvl is None or tvl.queued_tvl is None
        else _eth(tvl.unstaked_tvl + tvl.queued_tvl),
        "apy": _pct_or_null(current["apy"]),
        "base_apy": _pct(Decimal(str(current["baseApy"]))),
        "native_apy": _pct(Decimal(str(current["nativeApy"]))),
        "total_apy": _pct_or_null(current["totalApy"]),
        "total_users": holders,
        "ever_holders": ever,
    }
    snapshot = MetricSnapshot.objects.filter(lat=lat, timestamp=hour).first()
    if snapshot is None:
        snapshot = MetricSnapshot.objects.create(lat=lat, timestamp=hour, **values)
    else:
        model_update(snapshot, values)
    if (lat.apys, lat.apy_gaps) != (apys, gaps):
        Lat.objects.filter(pk=lat.pk).update(apys=apys, apy_gaps=gaps)
        documents_changed()  # update() sends no signal
    return snapshot
