"""lat_detail: the LAT detail's values in one statement (a row per token, the LAT's own values and
its AVS's curated metadata on each), read back exactly."""

from __future__ import annotations

from decimal import Decimal

import pytest

from core.errors import NotFound
from metrics import selectors
from tests import factories as f

pytestmark = pytest.mark.django_db

A = f.address
BIG = 2**255 + 7  # a uint256 beyond any float's precision


def test_a_lat_without_tokens():
    avs = f.AvsFactory(address=A(0xA1), metadata_name="An AVS", tags=["restaking"])
    f.LatFactory(proxy_address=A(0x1101), avs=avs)
    detail = selectors.lat_detail(address=A(0x1101))
    assert detail.record.tokens == []
    assert detail.curated_metadata["avsAddress"] == A(0xA1)
    assert detail.curated_metadata["metadataName"] == "An AVS"
    assert detail.curated_metadata["metadataWebsite"] is None
    assert detail.curated_metadata["tags"] == ["restaking"]


def test_tokens_in_address_order_with_exact_amounts_and_their_nodes_stakes_summed():
    lat = f.LatFactory(proxy_address=A(0x1102), unit_eth_price=None)
    later = f.TokenFactory(address=A(0x7F2), symbol="LATER")
    earlier = f.TokenFactory(address=A(0x7F1), symbol="EARLIER", decimals=8)
    f.LatTokenFactory(lat=lat, token=later, balance=BIG, queued_balance=5, price_per_unit=BIG)
    f.LatTokenFactory(lat=lat, token=earlier, balance=0, queued_balance=0, decimals=8)
    for node_id, amount in ((0, BIG), (1, 3)):
        node = f.StakerNodeFactory(lat=lat, node_id=node_id)
        f.NodeAssetFactory(
            node=node, token=later, strategy_address=A(0x51), core_shares=1, staked_amount=amount
        )
    detail = selectors.lat_detail(address=A(0x1102))
    record = detail.record
    assert [link.symbol for link in record.tokens] == ["EARLIER", "LATER"]
    assert record.unit_eth_price is None
    first, second = record.tokens
    assert (first.decimals, first.balance, first.queued_balance) == (8, Decimal(0), Decimal(0))
    assert (second.balance, second.queued_balance) == (Decimal(BIG), Decimal(5))
    assert second.price_per_unit == Decimal(BIG)
    staked = {link.token_id: link.staked_amount for link in record.tokens}
    assert staked == {earlier.id: Decimal(0), later.id: Decimal(BIG + 3)}
    assert str(int(staked[later.id])) == str(BIG + 3)


def test_an_unknown_address():
    with pytest.raises(NotFound):
        selectors.lat_detail(address=A(0x1199))
