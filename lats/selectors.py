"""Reads of LATs, tokens, AVSs, fees and exchange rates, all from the database."""

from __future__ import annotations

import json
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.db.models import Prefetch, QuerySet

from core.db import fetch_prepared
from core.errors import NotFound
from core.replicas import reading
from lats.models import Avs, FeeStructure, Lat, LatToken, Token
from lats.values import amount_for_one_lat, shares_for_one_token


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


# --- LAT records: the hot reads (endpoints 1 and 2), plain rows in one statement -----------


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
    staked_amount: Decimal  # what the LAT's nodes stake of it (LatToken.staked_amount)


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
    unit_eth_price: Decimal | None
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
    "staked_amount",
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


# The LAT records in one statement, plain SQL: the ORM would spend longer compiling the query
# than PostgreSQL spends answering it, and these are the reads a live service serves most
# often uncached (every indexed change invalidates the read documents). One row per supported
# token (one with null token columns for a LAT that supports none): LatRecord's fields in
# order (the AVS address from the AVS row), then TokenLink's. The same ORDER BY as the ORM's
# (chain id, proxy address; a LAT's tokens by address). Callers may add columns after these
# (`RECORD_WIDTH` of them come first) and conditions on `l` (the LAT), `a` (its AVS), `lt` (the
# link) and `t` (the token).
RECORD_COLUMNS = """
    l.id, l.proxy_address, l.implementation_address, l.name, l.symbol, l.avs_id, a.address,
    l.chain_id, l.max_nodes, l.contract_deployments, l.base_asset, l.base_asset_symbol,
    l.group_override, l.unit_eth_price, l.total_assets, l.total_supply, l.apys,
    lt.lat_id, lt.token_id, t.address, t.symbol, lt.strategy_address, lt.volatility_threshold,
    lt.price_per_unit, lt.decimals, lt.balance, lt.queued_balance, t.base_apy, t.ref_id,
    lt.staked_amount"""
RECORD_FROM = f"""
    {Lat._meta.db_table} l
    JOIN {Avs._meta.db_table} a ON a.id = l.avs_id
    LEFT JOIN {LatToken._meta.db_table} lt ON lt.lat_id = l.id
    LEFT JOIN {Token._meta.db_table} t ON t.id = lt.token_id"""
RECORD_ORDER = "l.chain_id, l.proxy_address, t.address"
_LAT_WIDTH = 17  # LatRecord's fields but its tokens
RECORD_WIDTH = _LAT_WIDTH + 13  # and TokenLink's
_BASE_APY = Token._meta.get_field("base_apy")


def uint_column(value: Decimal | str) -> Decimal:
    """A UintField's column as the ORM gives it: a Decimal (PostgreSQL's NUMERIC already is
    one; SQLite stores the digits as text)."""
    return value if type(value) is Decimal else Decimal(value)


def json_column(value: Any) -> Any:
    """A JSONField's column read with plain SQL: Django has the database drivers hand it over
    as text."""
    return json.loads(value) if isinstance(value, str) else value


def _record(row: tuple) -> LatRecord:
    (id_, proxy, implementation, name, symbol, avs_id, avs, chain_id, max_nodes) = row[:9]
    (deployments, base_asset, base_symbol, override, unit_price, assets, supply, apys) = row[9:17]
    return LatRecord(
        id_,
        proxy,
        implementation,
        name,
        symbol,
        avs_id,
        avs,
        chain_id,
        max_nodes,
        json_column(deployments),
        base_asset,
        base_symbol,
        override,
        None if unit_price is None else uint_column(unit_price),
        uint_column(assets),
        uint_column(supply),
        json_column(apys),
        [],
    )


def _link(row: tuple) -> TokenLink:
    (lat_id, token_id, address, symbol, strategy, threshold, price, decimals) = row[17:25]
    (balance, queued, base_apy, ref_id, staked) = row[25:RECORD_WIDTH]
    return TokenLink(
        lat_id,
        token_id,
        address,
        symbol,
        strategy,
        uint_column(threshold),
        uint_column(price),
        decimals,
        uint_column(balance),
        uint_column(queued),
        base_apy if type(base_apy) is Decimal else _BASE_APY.to_python(base_apy),
        ref_id,
        uint_column(staked),
    )


def records_from_rows(rows: list[tuple]) -> list[tuple[LatRecord, list[tuple]]]:
    """The records of a RECORD_COLUMNS statement's rows, each with its own rows (the columns
    a caller added are read from those, one row per token)."""
    out: list[tuple[LatRecord, list[tuple]]] = []
    for row in rows:
        if not out or out[-1][0].id != row[0]:
            out.append((_record(row), []))
        record, own = out[-1]
        own.append(row)
        if row[_LAT_WIDTH] is not None:
            record.tokens.append(_link(row))
    return out


def lat_records(*, address: str | None = None) -> list[LatRecord]:
    """Every LAT (or the one at `address`) with its tokens, in chain id, address order (one
    statement)."""
    where, params = ("WHERE l.proxy_address = %s", [address]) if address is not None else ("", [])
    with reading().cursor() as cursor:
        cursor.execute(
            f"SELECT {RECORD_COLUMNS} FROM {RECORD_FROM} {where} ORDER BY {RECORD_ORDER}", params
        )
        rows = cursor.fetchall()
    return [record for record, _ in records_from_rows(rows)]


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


# GET /lat: only what the list's documents show, the uint256 columns as the decimal text they
# are served as (NUMERIC(78, 0) has no fraction to print; SQLite stores that very text). Fewer,
# simpler values than the records' statement: the list is every LAT with every token.
_LIST_SQL = f"""
SELECT l.id, l.proxy_address, l.implementation_address, l.name, l.symbol, a.address,
    l.chain_id, l.max_nodes, l.contract_deployments, l.base_asset, l.base_asset_symbol,
    l.group_override, t.address, lt.strategy_address, CAST(lt.volatility_threshold AS TEXT),
    CAST(lt.price_per_unit AS TEXT), lt.decimals
FROM {RECORD_FROM}
ORDER BY {RECORD_ORDER}
"""


def lat_list_documents() -> list[tuple[str, dict]]:
    """Every LAT's document (`lat_document`'s) with its group, in chain id, address order (one
    statement)."""
    rows = fetch_prepared(_LIST_SQL)
    out: list[tuple[str, dict]] = []
    lat_id = None
    for row in rows:
        if row[0] != lat_id:
            lat_id = row[0]
            group = Lat.group_of(
                base_asset=row[9], base_asset_symbol=row[10], group_override=row[11]
            )
            out.append((group, _listed_lat(row)))
        if row[12] is not None:
            out[-1][1]["tokens"].append(
                {
                    "address": row[12],
                    "strategyAddress": row[13],
                    "volatilityThreshold": row[14],
                    "pricePerUnit": row[15],
                    "decimals": row[16],
                }
            )
    return out


def _listed_lat(row: tuple) -> dict:
    deployments = json_column(row[8]) or {}
    return {
        "proxyAddress": row[1],
        "implementationAddress": row[2],
        "name": row[3],
        "symbol": row[4],
        "avsAddress": row[5],
        "chainId": row[6],
        "maxNodes": row[7],
        "contractDeployments": {
            "implementation": dict(deployments.get("implementation") or {}),
            "proxy": dict(deployments.get("proxy") or {}),
        },
        "tokens": [],
    }


def lat_list_grouped(documents: list[tuple[str, dict]]) -> dict[str, list[dict]]:
    """The list's documents under their group keys, each group present (possibly empty)."""
    groups: dict[str, list[dict]] = {choice: [] for choice in Lat.Group.values}
    for group, document in documents:
        groups.setdefault(group, []).append(document)
    return groups


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
