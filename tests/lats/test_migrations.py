"""Migration lats 0010 on stored nodes: each token link's staked_amount is filled with what its
LAT's nodes stake of the token, exactly."""

from __future__ import annotations

import pytest

from lats.models import LatToken
from tests import factories as f
from tests.migrating import leaves, migrate

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.xdist_group("migrations")]

BEFORE = [("lats", "0009_lat_apy_gaps")]
BIG = 2**250 + 1  # a Decimal sum would round it (28 digits)


def test_the_sums_are_filled_from_the_nodes_assets():
    lat, other = f.LatFactory(), f.LatFactory()
    eth, usd, idle = f.TokenFactory(), f.TokenFactory(), f.TokenFactory()
    links = {(lat.id, t.id): f.LatTokenFactory(lat=lat, token=t).id for t in (eth, usd, idle)} | {
        (other.id, eth.id): f.LatTokenFactory(lat=other, token=eth).id
    }
    held = {(lat, eth): [BIG, 5], (lat, usd): [7], (other, eth): [11, 13, 17]}
    for (owner, token), amounts in held.items():
        for amount in amounts:
            node = f.StakerNodeFactory(lat=owner)
            f.NodeAssetFactory(
                node=node,
                token=token,
                strategy_address=f.address(0x5),
                core_shares=amount,
                staked_amount=amount,
            )
    try:
        migrate(BEFORE)  # the column goes
        migrate(leaves())  # and comes back, filled by the migration
        filled = dict(LatToken.objects.values_list("id", "staked_amount"))
        assert {key: int(filled[link]) for key, link in links.items()} == {
            (lat.id, eth.id): BIG + 5,
            (lat.id, usd.id): 7,
            (lat.id, idle.id): 0,
            (other.id, eth.id): 41,
        }
    finally:
        migrate(leaves())
