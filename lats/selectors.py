"""Reads of LATs, tokens, AVSs, fees and exchange rates, all from the database."""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal

from django.db.models import Prefetch, QuerySet

from lats.models import BEACON_CHAIN_ETH, Avs, FeeStructure, Lat, LatToken, Token
from latsite.api.errors import NotFound

WAD = Decimal(10) ** 18
WAD_INT = 10**18
DEFAULT_OPERATOR_SPLIT_BIPS = 1000  # EigenLayer's default operator split: 10%
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


def _lat_tokens_prefetch() -> Prefetch:
    return Prefetch(
        "lat_tokens",
        queryset=LatToken.objects.select_related("token").order_by("token__address"),
    )


def lat_list() -> QuerySet[Lat]:
    return (
        Lat.objects.select_related("avs")
        .prefetch_related(_lat_tokens_prefetch())
        .order_by("chain_id", "proxy_address")
    )


def lat_get(*, address: str) -> Lat:
    lat = lat_list().filter(proxy_address=address).first()
    if lat is None:
        raise NotFound(f"No LAT at {address}.")
    return lat


# --- LAT records: the hot reads (endpoints 1 and 2), plain rows in two queries -------------


@dataclass(frozen=True)
class TokenLink:
    """A supported token of a LAT, as the read endpoints and the TVL need it."""

    lat_id: int
    token_id: int
    address: str
    symbol: str
    strategy_address: str
    volatility_threshold: Decimal
    price_per_unit: Decimal
    decimals: int
    balance: Decimal
    queued_balance: Decimal
    base_apy: Decimal
    ref_id: int


@dataclass(frozen=True)
class LatRecord:
    id: int
    proxy_address: str
    implementation_address: str
    name: str
    symbol: str
    avs_id: int
    avs_address: str
    chain_id: int
    max_nodes: int
    contract_deployments: dict
    base_asset: str
    base_asset_symbol: str
    group_override: str
    unit_eth_price: Decimal
    total_assets: Decimal
    total_supply: Decimal
    apys: dict
    tokens: list[TokenLink]

    @property
    def group(self) -> str:
        return Lat.group_of(
            base_asset=self.base_asset,
            base_asset_symbol=self.base_asset_symbol,
            group_override=self.group_override,
        )


_LAT_COLUMNS = (
    "id",
    "proxy_address",
    "implementation_address",
    "name",
    "symbol",
    "avs_id",
    "avs__address",
    "chain_id",
    "max_nodes",
    "contract_deployments",
    "base_asset",
    "base_asset_symbol",
    "group_override",
    "unit_eth_price",
    "total_assets",
    "total_supply",
    "apys",
)
_LINK_COLUMNS = (
    "lat_id",
    "token_id",
    "token__address",
    "token__symbol",
    "strategy_address",
    "volatility_threshold",
    "price_per_unit",
    "decimals",
    "balance",
    "queued_balance",
    "token__base_apy",
    "token__ref_id",
)


def token_links(*, lat_ids: list[int] | None = None) -> dict[int, list[TokenLink]]:
    """lat id -> its tokens, in token address order (one query)."""
    links = LatToken.objects.order_by("lat_id", "token__address")
    if lat_ids is not None:
        links = links.filter(lat_id__in=lat_ids)
    out: dict[int, list[TokenLink]] = {}
    for row in links.values_list(*_LINK_COLUMNS):
        out.setdefault(row[0], []).append(TokenLink(*row))
    return out


def lat_records(*, address: str | None = None) -> list[LatRecord]:
    """Every LAT (or the one at `address`) with its tokens, in chain id, address order."""
    lats = Lat.objects.order_by("chain_id", "proxy_address")
    if address is not None:
        lats = lats.filter(proxy_address=address)
    rows = list(lats.values_list(*_LAT_COLUMNS))
    if not rows:
        return []
    links = token_links(lat_ids=[row[0] for row in rows] if address is not None else None)
    return [LatRecord(*row, tokens=links.get(row[0], [])) for row in rows]


def lat_record(*, address: str) -> LatRecord:
    records = lat_records(address=address)
    if not records:
        raise NotFound(f"No LAT at {address}.")
    return records[0]


def token_document(link: TokenLink) -> dict:
    return {
        "address": link.address,
        "strategyAddress": link.strategy_address,
        "volatilityThreshold": str(int(link.volatility_threshold)),
        "pricePerUnit": str(int(link.price_per_unit)),
        "decimals": link.decimals,
    }


def lat_document(record: LatRecord) -> dict:
    """The LAT resource of interface.md (LatSerializer's shape)."""
    deployments = record.contract_deployments or {}
    return {
        "proxyAddress": record.proxy_address,
        "implementationAddress": record.implementation_address,
        "name": record.name,
        "symbol": record.symbol,
        "avsAddress": record.avs_address,
        "chainId": record.chain_id,
        "maxNodes": record.max_nodes,
        "contractDeployments": {
            "implementation": dict(deployments.get("implementation") or {}),
            "proxy": dict(deployments.get("proxy") or {}),
        },
        "tokens": [token_document(link) for link in record.tokens],
    }


def lat_documents_grouped(records: list[LatRecord]) -> dict[str, list[dict]]:
    groups: dict[str, list[dict]] = {choice: [] for choice in Lat.Group.values}
    for record in records:
        groups.setdefault(record.group, []).append(lat_document(record))
    return groups


def tvl_document(tvl: Tvl) -> dict:
    return {
        "tvl": float(tvl.tvl),
        "unstakedTvl": float(tvl.unstaked_tvl),
        "stakedTvl": float(tvl.staked_tvl),
        "queuedTvl": float(tvl.queued_tvl),
        "tvlAssets": {k: float(v) for k, v in tvl.tvl_assets.items()},
        "tvlAssetsEth": {k: float(v) for k, v in tvl.tvl_assets_eth.items()},
    }


_CURATED = {
    "avsAddress": "address",
    "metadataName": "metadata_name",
    "metadataDescription": "metadata_description",
    "metadataCommunityChat": "metadata_community_chat",
    "metadataLogo": "metadata_logo",
    "metadataMessaging": "metadata_messaging",
    "metadataWebsite": "metadata_website",
    "metadataSocial": "metadata_social",
    "metadataCode": "metadata_code",
    "metadataTokenAddress": "metadata_token_address",
    "tags": "tags",
}


def curated_metadata(*, avs_id: int) -> dict:
    row = Avs.objects.filter(id=avs_id).values_list(*_CURATED.values()).get()
    return dict(zip(_CURATED, row, strict=True))


def lat_detail_document(
    *, address: str, with_tvl: bool, with_metadata: bool, with_rewards: bool
) -> dict:
    """The LAT detail (LatDetailSerializer's shape), built from plain rows."""
    lat = lat_record(address=address)
    document = lat_document(lat)
    document["assets"] = [
        {
            "asset": link.address,
            "balance": str(int(link.balance)),
            "queuedBalance": str(int(link.queued_balance)),
        }
        for link in lat.tokens
    ]
    if with_tvl:
        document["tvl"] = tvl_document(lat_tvl(lat=lat, links=lat.tokens))
    if with_rewards:
        document["apys"] = lat_apys(lat=lat)
    if with_metadata:
        document["curatedMetadata"] = curated_metadata(avs_id=lat.avs_id)
    return document


def token_list_with_lats() -> QuerySet[Token]:
    links = LatToken.objects.select_related("lat").order_by("lat__chain_id", "lat__proxy_address")
    return (
        Token.objects.filter(lat_links__isnull=False)
        .distinct()
        .prefetch_related(Prefetch("lat_links", queryset=links))
        .order_by("chain_id", "address")
    )


def avs_lats(*, address: str) -> list[Lat]:
    avs_ids = list(Avs.objects.filter(address=address).values_list("id", flat=True))
    if not avs_ids:
        raise NotFound(f"No AVS at {address}.")
    return list(Lat.objects.filter(avs_id__in=avs_ids).order_by("chain_id", "proxy_address"))


# --- values -------------------------------------------------------------------------------


def unit_eth_price(lat: Lat) -> Decimal:
    """ETH value of one unit of account, 1e18-scaled."""
    if lat.base_asset.lower() == BEACON_CHAIN_ETH.lower():
        return WAD
    return Decimal(lat.unit_eth_price)


def to_eth(lat: Lat, link: LatToken, amount: Decimal) -> Decimal:
    """Token units -> ETH (whole), through pricePerUnit and the unit's ETH price."""
    in_unit = amount * Decimal(link.price_per_unit) / (Decimal(10) ** link.decimals) / WAD
    return in_unit * unit_eth_price(lat) / WAD


def staked_amounts(*, lat_id: int) -> dict[int, Decimal]:
    """token id -> amount staked in the LAT's nodes, token units.

    Summed here, not with SUM(): uint256 values overflow SQLite's 64-bit SUM.
    """
    from operators.models import NodeAsset

    totals: dict[int, Decimal] = {}
    rows = NodeAsset.objects.filter(node__lat_id=lat_id).values_list("token_id", "staked_amount")
    for token_id, amount in rows:
        totals[token_id] = totals.get(token_id, Decimal(0)) + Decimal(amount)
    return totals


@dataclass(frozen=True)
class Tvl:
    tvl: Decimal
    unstaked_tvl: Decimal
    staked_tvl: Decimal
    queued_tvl: Decimal
    tvl_assets: dict[str, Decimal] = field(default_factory=dict)
    tvl_assets_eth: dict[str, Decimal] = field(default_factory=dict)


def lat_tvl(*, lat: Lat | LatRecord, links: list[TokenLink]) -> Tvl:
    """TVL from stored balances and node shares (decisions.md, Values)."""
    staked = staked_amounts(lat_id=lat.id)
    unstaked_eth = staked_eth = queued_eth = Decimal(0)
    assets: dict[str, Decimal] = {}
    assets_eth: dict[str, Decimal] = {}
    for link in links:
        symbol = link.symbol
        staked_amount = staked.get(link.token_id, Decimal(0))
        total = Decimal(link.balance) + Decimal(link.queued_balance) + staked_amount
        assets[symbol] = total / (Decimal(10) ** link.decimals)
        assets_eth[symbol] = to_eth(lat, link, total)
        unstaked_eth += to_eth(lat, link, Decimal(link.balance))
        queued_eth += to_eth(lat, link, Decimal(link.queued_balance))
        staked_eth += to_eth(lat, link, staked_amount)
    return Tvl(
        tvl=unstaked_eth + staked_eth + queued_eth,
        unstaked_tvl=unstaked_eth,
        staked_tvl=staked_eth,
        queued_tvl=queued_eth,
        tvl_assets=assets,
        tvl_assets_eth=assets_eth,
    )


def lat_apys(*, lat: Lat | LatRecord) -> dict[str, dict[str, str]]:
    """Stored APY windows, every window and member present ("0" where nothing is known)."""
    stored = lat.apys or {}
    return {
        window: {name: str((stored.get(window) or {}).get(name, "0")) for name in APY_FIELDS}
        for window in APY_WINDOWS
    }


def lat_exchange_rate_unit(lat: Lat) -> Decimal:
    """Unit of account per whole LAT, 1e18-scaled (1:1 while the supply is zero)."""
    if not lat.total_supply:
        return WAD
    return Decimal(lat.total_assets) * WAD / Decimal(lat.total_supply)


def _amount_for_one_lat(lat: Lat, link: LatToken) -> Decimal:
    """calculateAmount(token, 1e18) in whole tokens, with the contract's integer rounding."""
    supply, assets = int(lat.total_supply), int(lat.total_assets)
    value = WAD_INT if supply == 0 else WAD_INT * assets // supply
    raw = value * 10**link.decimals // int(link.price_per_unit)
    return Decimal(raw) / Decimal(10) ** link.decimals


def _shares_for_one_token(lat: Lat, link: LatToken) -> Decimal:
    """calculateShares(token, one whole token) in whole LATs, with the contract's rounding."""
    supply, assets = int(lat.total_supply), int(lat.total_assets)
    value = 10**link.decimals * int(link.price_per_unit) // 10**link.decimals
    raw = value if supply == 0 or assets == 0 else value * supply // assets
    return Decimal(raw) / WAD


def exchange_rates(*, address: str) -> dict[str, float]:
    """For a LAT: tokens per whole LAT by token symbol; for a token: LATs per whole token."""
    lat = Lat.objects.filter(proxy_address=address).prefetch_related(_lat_tokens_prefetch()).first()
    if lat is not None:
        return {
            link.token.symbol: float(_amount_for_one_lat(lat, link))
            for link in lat.lat_tokens.all()
            if link.price_per_unit
        }
    links = list(
        LatToken.objects.filter(token__address=address)
        .select_related("lat")
        .order_by("lat__chain_id", "lat__proxy_address")
    )
    if not links:
        raise NotFound(f"{address} is neither a LAT nor a token that a LAT supports.")
    return {link.lat.symbol: float(_shares_for_one_token(link.lat, link)) for link in links}


def lat_fees(*, lat: Lat) -> dict[str, float]:
    from operators.models import OperatorAvsSplit, StakerNode

    fees = FeeStructure.objects.filter(lat=lat).first()
    operator_ids = set(
        StakerNode.objects.filter(lat=lat, operator__isnull=False).values_list(
            "operator_id", flat=True
        )
    )
    splits = dict(
        OperatorAvsSplit.objects.filter(
            operator_id__in=operator_ids, avs_id=lat.avs_id
        ).values_list("operator_id", "split_bips")
    )
    if operator_ids:
        bips = [splits.get(op, DEFAULT_OPERATOR_SPLIT_BIPS) for op in operator_ids]
        avg = Decimal(sum(bips)) / len(bips) / 100
    else:
        avg = Decimal(0)
    return {
        "managementFee": float(fees.management_fee) if fees else 0.0,
        "performanceFee": float(fees.performance_fee) if fees else 0.0,
        "avgOperatorPerformanceFee": float(avg),
    }
