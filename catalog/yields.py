"""`GET /yields` (extensions.md, "Yields"): every LAT as a pool object of DefiLlama's yield
server, so that a listing there is a few lines of adapter. Its checks (their adapters' test):
`pool`, `chain`, `project`, `symbol` are strings, `tvlUsd` and at least one APY are finite
numbers, token lists are lists of strings, `rewardTokens` is not empty where `apyReward` is
set, and pool ids are unique."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

from django.conf import settings
from django.utils import timezone

from lats.models import Avs
from lats.networks import DEFILLAMA_CHAINS
from lats.selectors import LatRecord, lat_records
from metrics import selectors as metrics

DESCRIPTION = """Every LAT as a pool of DefiLlama's yield server (its adapters' pool objects):
`pool` (`{proxyAddress}-{chain}`, lower case), `chain` (DefiLlama's name of the chain:
`Ethereum`, ...; YIELDS_CHAIN_NAME_<chainId> names another), `project` (setting
YIELDS_PROJECT), `symbol`, `tvlUsd` (the TVL in ETH times ETH's USD price from the chain's
ETH/USD feed: known for Ethereum mainnet, ETH_USD_FEED_<chainId> for any chain), `apyBase`
(`nativeApy` of the last day), `apyBase7d` (`nativeApy`, 7 days), `apyReward` (`apy`, 7 days;
null where the rewards APY is unknown), `rewardTokens` (the tokens of the counted rewards
submissions of the LAT's AVS paying on any of the last 7 days), `underlyingTokens` (the LAT's
tokens), `pricePerShare` (units of account per whole LAT), `poolMeta` (the AVS's name, or null),
`url` (setting YIELDS_URL_TEMPLATE with `{address}` and `{chainId}`; by default the LAT's detail
here). APYs are percentages. A LAT whose value in USD is unknown (no ETH/USD feed for its chain,
or no price feed for its unit of account) is left out of `data` and named, with why, in
`meta.omitted`."""


def chain_name(chain_id: int) -> str:
    return settings.YIELDS_CHAIN_NAMES.get(chain_id) or DEFILLAMA_CHAINS.get(
        chain_id, f"Chain {chain_id}"
    )


def pools(url_template: str) -> dict:
    records = lat_records()
    usd = metrics.usd_prices()
    today = timezone.now().date()
    tokens = metrics.reward_tokens(
        avs_ids={r.avs_id for r in records},
        first=today - timedelta(days=7),
        last=today - timedelta(days=1),
    )
    names = dict(
        Avs.objects.filter(id__in={r.avs_id for r in records}).values_list("id", "metadata_name")
    )
    data, omitted = [], []
    for record in records:
        tvl = metrics.lat_tvl(lat=record, links=record.tokens)
        price = usd.get(record.chain_id)
        if price is None or tvl.tvl is None:
            why = _unknown(record, price)
            omitted.append(
                {"address": record.proxy_address, "symbol": record.symbol, "reason": why}
            )
            continue
        name = names.get(record.avs_id)
        data.append(_pool(record, tvl.tvl * price, tokens[record.avs_id], name, url_template))
    return {"data": data, "meta": {"omitted": omitted}}


def _unknown(record: LatRecord, price: Decimal | None) -> str:
    if price is None:
        return (
            f"no ETH/USD price for chain {record.chain_id}: set ETH_USD_FEED_{record.chain_id} "
            "to a Chainlink-style ETH/USD feed on that chain"
        )
    return (
        f"its TVL in ETH is unknown: no price feed for its unit of account {record.base_asset} "
        "(admin: Price feeds)"
    )


def _number(value: str | None) -> float | None:
    return None if value is None else float(value)


def _pool(
    record: LatRecord,
    tvl_usd: Decimal,
    reward_tokens: list[str],
    avs_name: str | None,
    url_template: str,
) -> dict:
    apys = metrics.lat_apys(lat=record)
    chain = chain_name(record.chain_id)
    reward = _number(apys["trailing7d"]["apy"])
    return {
        "pool": f"{record.proxy_address}-{chain}".lower(),
        "chain": chain,
        "project": settings.YIELDS_PROJECT,
        "symbol": record.symbol,
        "tvlUsd": float(tvl_usd),
        "apyBase": _number(apys["current"]["nativeApy"]),
        "apyBase7d": _number(apys["trailing7d"]["nativeApy"]),
        "apyReward": reward,
        "rewardTokens": reward_tokens,
        "underlyingTokens": [link.address for link in record.tokens],
        "pricePerShare": float(metrics.rate_text(record.total_assets, record.total_supply)),
        "poolMeta": avs_name,
        "url": url_template.format(address=record.proxy_address, chainId=record.chain_id),
    }
