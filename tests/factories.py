"""factory_boy factories for the service's models."""

from __future__ import annotations

import datetime as dt

import factory
from eth_utils import to_checksum_address

from chain.activity import ActivityLog
from core.addresses import BEACON_CHAIN_ETH
from deposits.services import DepositEvent
from lats.models import Avs, FeeStructure, Lat, LatToken, Token
from metrics.models import MetricSnapshot
from operators.models import NodeAsset, Operator, OperatorAvsSplit, StakerNode


def address(n: int) -> str:
    return to_checksum_address(f"0x{n:040x}")


class AvsFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Avs

    chain_id = 31337
    address = factory.Sequence(lambda n: address(0xA0000 + n))


class TokenFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Token

    chain_id = 31337
    address = factory.Sequence(lambda n: address(0x70000 + n))
    symbol = factory.Sequence(lambda n: f"TK{n}")
    name = factory.Sequence(lambda n: f"Token {n}")
    decimals = 18


class LatFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Lat

    chain_id = 31337
    proxy_address = factory.Sequence(lambda n: address(0x10000 + n))
    implementation_address = factory.Sequence(lambda n: address(0x20000 + n))
    name = factory.Sequence(lambda n: f"Liquid AVS Token {n}")
    symbol = factory.Sequence(lambda n: f"LAT{n}")
    avs = factory.SubFactory(AvsFactory)
    base_asset = BEACON_CHAIN_ETH
    max_nodes = 10
    contract_deployments = factory.LazyFunction(lambda: {"implementation": {}, "proxy": {}})
    unit_eth_price = 10**18


class LatTokenFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = LatToken

    lat = factory.SubFactory(LatFactory)
    token = factory.SubFactory(TokenFactory)
    strategy_address = factory.Sequence(lambda n: address(0x50000 + n))
    volatility_threshold = 0
    price_per_unit = 10**18
    decimals = factory.SelfAttribute("token.decimals")


class FeeStructureFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = FeeStructure

    lat = factory.SubFactory(LatFactory)


class OperatorFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Operator

    chain_id = 31337
    address = factory.Sequence(lambda n: address(0x90000 + n))


class OperatorAvsSplitFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = OperatorAvsSplit


class StakerNodeFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = StakerNode

    lat = factory.SubFactory(LatFactory)
    address = factory.Sequence(lambda n: address(0x30000 + n))
    node_id = factory.Sequence(lambda n: n)
    created_at_block = 10
    created_at = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    updated_at_block = 20
    updated_at = dt.datetime(2026, 1, 2, tzinfo=dt.UTC)


class NodeAssetFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = NodeAsset


class MetricSnapshotFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = MetricSnapshot


# --- deposit events, as the chain reader hands them to deposit_record_events -----------------

T0 = dt.datetime(2026, 3, 1, tzinfo=dt.UTC)


def event(
    block: int,
    log: int,
    *,
    sender: int = 0xE1,
    receiver: int = 0xE2,
    asset: int = 0x5E,
    amount: int = 10**18,
    shares: int = 10**18,
) -> DepositEvent:
    return DepositEvent(
        tx_hash=f"0x{block:032x}{log:032x}",
        log_index=log,
        block_number=block,
        block_hash=f"0x{block:064x}",
        created_at=T0 + dt.timedelta(seconds=12 * block),
        kind="AssetDeposited",
        sender=address(sender),
        receiver=address(receiver),
        asset=address(asset),
        amount=amount,
        shares=shares,
    )


def transfer_log(block: int, log: int, sender: str, receiver: str, value: int) -> ActivityLog:
    """A decoded Transfer log (a mint from, or a burn to, the zero address included)."""
    kind = "mint" if int(sender, 16) == 0 else "burn" if int(receiver, 16) == 0 else "transfer"
    return ActivityLog(
        type=kind,
        event="Transfer",
        tx_hash=f"0x{block:032x}{log:032x}",
        log_index=log,
        block_number=block,
        block_hash=f"0x{block:064x}",
        args={"from": sender, "to": receiver, "value": str(value)},
    )
