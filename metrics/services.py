"""Writes of metric snapshots and the APY windows derived from them."""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal

from django.db import transaction
from django.utils import timezone

from deposits.models import Deposit
from lats.models import Lat
from latsite.api.documents import documents_changed
from lats.selectors import APY_WINDOWS, WAD, lat_exchange_rate_unit, lat_tvl, token_links
from metrics.models import MetricSnapshot

WINDOWS = {
    "current": timedelta(days=1),
    "trailing7d": timedelta(days=7),
    "trailing30d": timedelta(days=30),
    "trailing3m": timedelta(days=91),
    "trailing6m": timedelta(days=182),
    "trailing1y": timedelta(days=365),
}
YEAR = Decimal(365 * 86400)


def _rate(total_assets, total_supply) -> Decimal:
    if not total_supply:
        return WAD
    return Decimal(total_assets) * WAD / Decimal(total_supply)


def _native_apy(now: datetime, rate_now: Decimal, then: MetricSnapshot | None) -> Decimal:
    """Annualised growth of the exchange rate since `then` (simple, percent)."""
    if then is None:
        return Decimal(0)
    elapsed = Decimal((now - then.timestamp).total_seconds())
    rate_then = _rate(then.total_assets, then.total_supply)
    if elapsed <= 0 or not rate_then:
        return Decimal(0)
    return (rate_now / rate_then - 1) * YEAR / elapsed * 100


def _base_apy(links, tvl) -> Decimal:
    """TVL-weighted staking yield of the LAT's tokens (Token.base_apy, set in admin)."""
    total = tvl.tvl
    if not total:
        return Decimal(0)
    weighted = Decimal(0)
    for link in links:
        weighted += tvl.tvl_assets_eth.get(link.symbol, Decimal(0)) * link.base_apy
    return weighted / total


def _eth(value: Decimal) -> Decimal:
    """At the scale of the snapshot's TVL columns, so that equal values compare equal."""
    return value.quantize(Decimal(10) ** -18)


def _pct(value: Decimal) -> Decimal:
    return value.quantize(Decimal(10) ** -8)


def _fmt(value: Decimal) -> str:
    return format(value.quantize(Decimal("0.0001")).normalize(), "f")


@transaction.atomic
def snapshot_record(*, lat: Lat, at: datetime | None = None) -> MetricSnapshot:
    """Record the LAT's metrics now (one snapshot an hour, the latest wins) and its APY windows.

    `apy` (AVS rewards) needs the rewards indexer and is 0 until it exists.
    """
    now = at or timezone.now()
    hour = now.replace(minute=0, second=0, microsecond=0)
    lat = Lat.objects.get(pk=lat.pk)
    links = token_links(lat_ids=[lat.id]).get(lat.id, [])
    tvl = lat_tvl(lat=lat, links=links)
    rate_now = lat_exchange_rate_unit(lat)
    history = MetricSnapshot.objects.filter(lat=lat).exclude(timestamp=hour)
    apys: dict[str, dict[str, str]] = {}
    base = _base_apy(links, tvl)
    for window, span in WINDOWS.items():
        then = history.filter(timestamp__gte=now - span).order_by("timestamp").first()
        native = _native_apy(now, rate_now, then)
        apys[window] = {
            "apy": "0",
            "baseApy": _fmt(base),
            "nativeApy": _fmt(native),
            "totalApy": _fmt(base),
        }
    users = Deposit.objects.filter(lat=lat).values("sender").distinct().count()
    values = {
        "block_number": lat.state_block or 0,
        "total_assets": lat.total_assets,
        "total_supply": lat.total_supply,
        "total_tvl_eth": _eth(tvl.tvl),
        "staked_tvl_eth": _eth(tvl.staked_tvl),
        "unstaked_tvl_eth": _eth(tvl.unstaked_tvl + tvl.queued_tvl),
        "apy": Decimal(0),
        "base_apy": _pct(base),
        "native_apy": _pct(Decimal(apys["current"]["nativeApy"])),
        "total_apy": _pct(base),
        "total_users": users,
    }
    snapshot = MetricSnapshot.objects.filter(lat=lat, timestamp=hour).first()
    if snapshot is None:
        snapshot = MetricSnapshot.objects.create(lat=lat, timestamp=hour, **values)
    else:
        changed = [k for k, v in values.items() if getattr(snapshot, k) != values[k]]
        for key in changed:
            setattr(snapshot, key, values[key])
        if changed:
            snapshot.save(update_fields=changed)
    # avg30d: the mean of the last 30 daily values (each day's last snapshot).
    per_day: dict = {}
    for timestamp, native in (
        MetricSnapshot.objects.filter(lat=lat, timestamp__gte=now - timedelta(days=30))
        .order_by("timestamp")
        .values_list("timestamp", "native_apy")
    ):
        per_day[timestamp.date()] = native
    daily = list(per_day.values())
    mean = sum(daily, Decimal(0)) / len(daily) if daily else Decimal(0)
    apys["avg30d"] = {
        "apy": "0",
        "baseApy": _fmt(base),
        "nativeApy": _fmt(mean),
        "totalApy": _fmt(base),
    }
    ordered = {w: apys[w] for w in APY_WINDOWS}
    if lat.apys != ordered:
        Lat.objects.filter(pk=lat.pk).update(apys=ordered)
        documents_changed()  # update() sends no signal
    return snapshot
