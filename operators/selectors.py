"""Reads of operators, staker nodes and their assets, all from the database."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from decimal import Decimal

from django.db.models import Prefetch, QuerySet

from core.errors import NotFound
from lats.models import Lat, LatToken
from lats.values import to_eth
from operators.models import NodeAsset, Operator, OperatorAvsSplit, StakerNode


def _assets_prefetch() -> Prefetch:
    return Prefetch(
        "assets", queryset=NodeAsset.objects.select_related("token").order_by("token__address")
    )


def staker_nodes_of(*, lat: Lat) -> QuerySet[StakerNode]:
    return (
        StakerNode.objects.filter(lat=lat)
        .select_related("operator")
        .prefetch_related(_assets_prefetch())
        .order_by("node_id")
    )


def operator_addresses() -> list[str]:
    """Unique operator addresses of current delegations across all LATs."""
    return list(
        Operator.objects.filter(staker_nodes__isnull=False)
        .values_list("address", flat=True)
        .distinct()
        .order_by("address")
    )


def operator_get(*, address: str) -> Operator:
    operator = Operator.objects.filter(address=address).order_by("chain_id").first()
    if operator is None:
        raise NotFound(f"No operator at {address}.")
    return operator


def operator_nodes(*, operator: Operator) -> list[StakerNode]:
    return list(
        StakerNode.objects.filter(operator=operator)
        .select_related("lat")
        .prefetch_related(_assets_prefetch())
        .order_by("lat__proxy_address", "node_id")
    )


@dataclass(frozen=True)
class OperatorTvl:
    """Values in ETH are None where a LAT's unit of account has no known ETH price."""

    tvl: Decimal | None
    tvl_strategies: dict[str, Decimal]
    tvl_strategies_eth: dict[str, Decimal | None]


class Pricing:
    """ETH value of node assets, from each LAT's token prices (one query for all)."""

    def __init__(self, lats: list[Lat]) -> None:
        self.lats = {lat.id: lat for lat in lats}
        self.links: dict[tuple[int, int], LatToken] = {
            (link.lat_id, link.token_id): link
            for link in LatToken.objects.filter(lat_id__in=list(self.lats)).order_by()
        }

    def eth(self, lat_id: int, asset: NodeAsset) -> Decimal | None:
        link = self.links.get((lat_id, asset.token_id))
        if link is None:
            return Decimal(0)
        return to_eth(self.lats[lat_id], link, Decimal(asset.staked_amount))


def nodes_tvl(nodes: list[StakerNode], *, pricing: Pricing | None = None) -> OperatorTvl:
    """TVL of what these nodes have staked; strategies named by their token's symbol."""
    if pricing is None:
        pricing = Pricing(list({node.lat_id: node.lat for node in nodes}.values()))
    amounts: dict[str, Decimal] = defaultdict(Decimal)
    amounts_eth: dict[str, Decimal | None] = {}
    for node in nodes:
        for asset in node.assets.all():
            symbol = asset.token.symbol
            amounts[symbol] += Decimal(asset.staked_amount) / (Decimal(10) ** asset.token.decimals)
            value, so_far = pricing.eth(node.lat_id, asset), amounts_eth.get(symbol, Decimal(0))
            # One value unknown (a unit of account without a price feed) makes the sum unknown.
            amounts_eth[symbol] = None if value is None or so_far is None else so_far + value
    values = list(amounts_eth.values())
    return OperatorTvl(
        tvl=None if None in values else sum((v for v in values if v is not None), Decimal(0)),
        tvl_strategies=dict(amounts),
        tvl_strategies_eth=amounts_eth,
    )


def aggregate_allocations(nodes: list[StakerNode]) -> list[dict]:
    """Per asset, the sum over the nodes of staked amount and shares (integers: a Decimal sum
    rounds to 28 digits)."""
    totals: dict[str, dict] = {}
    for node in nodes:
        for asset in node.assets.all():
            row = totals.setdefault(
                asset.token.address,
                {
                    "asset": asset.token.address,
                    "strategy": asset.strategy_address,
                    "stakedAmount": 0,
                    "coreShares": 0,
                },
            )
            row["stakedAmount"] += int(asset.staked_amount)
            row["coreShares"] += int(asset.core_shares)
    return [totals[key] for key in sorted(totals)]


def lat_operator_groups(*, lat: Lat) -> list[tuple[Operator, list[StakerNode]]]:
    """The operators this LAT's nodes delegate to, each with its nodes of this LAT."""
    groups: dict[int, tuple[Operator, list[StakerNode]]] = {}
    for node in staker_nodes_of(lat=lat).filter(operator__isnull=False):
        node.lat = lat
        operator = node.operator
        if operator is not None:  # always, by the filter
            groups.setdefault(operator.pk, (operator, []))[1].append(node)
    return sorted(groups.values(), key=lambda pair: pair[0].address)


DEFAULT_OPERATOR_SPLIT_BIPS = 1000  # EigenLayer's default operator split: 10%


def lat_avg_operator_fee(*, lat: Lat) -> Decimal | None:
    """The mean split (percent) of the operators the LAT's nodes delegate to, for the LAT's
    AVS (EigenLayer's default where an operator set none); 0 with no operator; None where the
    chain's RewardsCoordinator is unknown (the splits cannot be read)."""
    operator_ids = set(
        StakerNode.objects.filter(lat=lat, operator__isnull=False).values_list(
            "operator_id", flat=True
        )
    )
    if not operator_ids:
        return Decimal(0)
    if not lat.core_contract("rewardsCoordinator"):
        return None
    splits = dict(
        OperatorAvsSplit.objects.filter(
            operator_id__in=operator_ids, avs_id=lat.avs_id
        ).values_list("operator_id", "split_bips")
    )
    bips = [splits.get(op, DEFAULT_OPERATOR_SPLIT_BIPS) for op in operator_ids]
    return Decimal(sum(bips)) / len(bips) / 100
