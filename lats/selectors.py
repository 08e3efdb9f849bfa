"""Reads of LATs, tokens, AVSs, fees and exchange rates, all from the database."""

from __future__ import annotations

from dataclasses import dataclass, fields
from decimal import Decimal

from django.db.models import Prefetch, QuerySet

from lats.models import Avs, FeeStructure, Lat, LatToken, Token
from lats.values import amount_for_one_lat, shares_for_one_token
from latsite.errors import NotFound


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


def lat_row(*, address: str) -> Lat:
    """The LAT's own row, nothing related (one query): for the endpoints that only need its
    id, chain and totals."""
    lat = Lat.objects.filter(proxy_address=address).first()
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
# LatRecord's fields in _LAT_COLUMNS' order (all but its tokens).
_RECORD_FIELDS = tuple(f.name for f in fields(LatRecord) if f.name != "tokens")
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
    return [
        LatRecord(**dict(zip(_RECORD_FIELDS, row, strict=True)), tokens=links.get(row[0], []))
        for row in rows
    ]


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


def asset_documents(record: LatRecord) -> list[dict]:
    """The LAT detail's `assets`: each token's balance and queued balance, raw."""
    return [
        {
            "asset": link.address,
            "balance": str(int(link.balance)),
            "queuedBalance": str(int(link.queued_balance)),
        }
        for link in record.tokens
    ]


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


def exchange_rates(*, address: str) -> dict[str, float]:
    """For a LAT: tokens per whole LAT by token symbol; for a token: LATs per whole token."""
    lat = Lat.objects.filter(proxy_address=address).prefetch_related(_lat_tokens_prefetch()).first()
    if lat is not None:
        return {
            link.token.symbol: float(amount_for_one_lat(lat, link))
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
    return {link.lat.symbol: float(shares_for_one_token(link.lat, link)) for link in links}


def lat_fee_structure(*, lat: Lat) -> dict[str, float]:
    """The LAT's own fees, as staff curate them (0 where none are set)."""
    fees = FeeStructure.objects.filter(lat=lat).first()
    return {
        "managementFee": float(fees.management_fee) if fees else 0.0,
        "performanceFee": float(fees.performance_fee) if fees else 0.0,
    }
