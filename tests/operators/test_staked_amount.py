"""LatToken.staked_amount: what a LAT's nodes stake of each token, kept in step with every write
of the nodes and their assets (the LAT detail reads it instead of summing the assets)."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from chain.results import Block, NodeAssetState, NodeState
from core.addresses import ZERO_ADDRESS
from lats.models import LatToken
from operators.models import NodeAsset
from operators.services import NodesReading, nodes_store, store_lat_staked
from tests import factories as f

pytestmark = pytest.mark.django_db

BIG = 2**200  # beyond 64 bits: SQLite's SUM would overflow, PostgreSQL's NUMERIC would not


def stored(link: LatToken) -> int:
    link.refresh_from_db()
    return int(link.staked_amount)


@pytest.fixture
def lat():
    """A LAT with two tokens and two nodes; another LAT's node holding the same token."""
    lat = f.LatFactory()
    eth, usd = f.TokenFactory(), f.TokenFactory()
    links = [f.LatTokenFactory(lat=lat, token=eth), f.LatTokenFactory(lat=lat, token=usd)]
    nodes = [f.StakerNodeFactory(lat=lat), f.StakerNodeFactory(lat=lat)]
    other = f.StakerNodeFactory()
    f.LatTokenFactory(lat=other.lat, token=eth)
    return lat, links, nodes, other


def asset(node, token, amount: int) -> NodeAsset:
    return f.NodeAssetFactory(
        node=node,
        token=token,
        strategy_address=f.address(0x777),
        core_shares=amount,
        staked_amount=amount,
    )


def test_sums_follow_assets_created_changed_and_deleted(lat):
    lat, (eth, usd), (one, two), other = lat
    first = asset(one, eth.token, BIG)
    asset(two, eth.token, 3)
    asset(one, usd.token, 7)
    asset(other, eth.token, 1000)  # another LAT's node: not this LAT's stake
    assert (stored(eth), stored(usd)) == (BIG + 3, 7)

    first.staked_amount = 5
    first.save()
    assert stored(eth) == 5 + 3

    first.delete()
    assert (stored(eth), stored(usd)) == (3, 7)
    assert stored(LatToken.objects.get(lat=other.lat)) == 1000


def test_a_deleted_node_takes_its_assets_out_of_the_sums(lat):
    lat, (eth, usd), (one, two), _ = lat
    asset(one, eth.token, 10)
    asset(two, eth.token, 20)
    asset(two, usd.token, 30)
    two.delete()  # its assets go with it (CASCADE)
    assert (stored(eth), stored(usd)) == (10, 0)


def test_a_queryset_delete_of_assets_is_summed_too(lat):
    # The follower removes the assets a node no longer holds with a queryset delete.
    lat, (eth, _), (one, two), _ = lat
    asset(one, eth.token, 10)
    gone = asset(two, eth.token, 20)
    NodeAsset.objects.filter(id__in=[gone.id]).delete()
    assert stored(eth) == 10


def test_a_token_link_added_after_the_assets_starts_from_their_sum(lat):
    lat, _, (one, two), _ = lat
    token = f.TokenFactory()
    asset(one, token, 4)
    asset(two, token, 6)
    link = f.LatTokenFactory(lat=lat, token=token)
    assert stored(link) == 10


def test_store_lat_staked_repairs_a_sum_written_around_the_orm(lat):
    lat, (eth, _), (one, _), _ = lat
    asset(one, eth.token, 10)
    LatToken.objects.filter(pk=eth.pk).update(staked_amount=Decimal(99))  # no signal
    store_lat_staked(lat_id=lat.id)
    assert stored(eth) == 10


def test_the_lat_detail_reads_the_kept_sums(api, lat):
    lat, (eth, usd), (one, two), _ = lat
    asset(one, eth.token, 2 * 10**18)
    asset(two, eth.token, 3 * 10**18)
    asset(two, usd.token, 10**6)
    body = api.get(f"/lat/{lat.proxy_address}?withTvl=true").json()
    # Nothing held by the LAT itself: the token amounts are the nodes' stakes in whole tokens.
    assert body["tvl"]["tvlAssets"] == {
        eth.token.symbol: 5.0,
        usd.token.symbol: float(Decimal(10**6) / Decimal(10) ** usd.decimals),
    }


def test_a_nodes_refresh_sums_each_lat_once(lat):
    """nodes_store (the follower's refresh of a LAT's nodes) creates, changes and removes
    several assets; the sums are right after it, made once for the LAT, not once per write."""
    lat, (eth, usd), (one, two), other = lat
    asset(one, eth.token, 10)
    asset(one, usd.token, 20)
    asset(two, eth.token, 30)
    asset(other, eth.token, 1000)
    strategy = f.address(0x777)
    reading = NodesReading(
        nodes=[
            NodeState(
                one.address,
                one.node_id,
                ZERO_ADDRESS,
                (  # eth changed, usd gone
                    NodeAssetState(eth.token.address, strategy, 11, BIG),
                ),
            ),
            NodeState(
                two.address,
                two.node_id,
                ZERO_ADDRESS,
                (  # eth changed, usd added
                    NodeAssetState(eth.token.address, strategy, 31, 32),
                    NodeAssetState(usd.token.address, strategy, 41, 42),
                ),
            ),
        ],
        splits={},
        created={},
    )
    block = Block(number=123, hash="0x" + "ab" * 32, timestamp=1_760_000_000)
    with transaction.atomic(), CaptureQueriesContext(connection) as queries:
        nodes_store(lat=lat, reading=reading, block=block)
    assert (stored(eth), stored(usd)) == (BIG + 32, 42)
    assert stored(LatToken.objects.get(lat=other.lat)) == 1000
    locks = [q["sql"] for q in queries if "FOR UPDATE" in q["sql"]]
    assert len(locks) == 1
    assert LatToken._meta.db_table in locks[0]
