"""Every list endpoint issues a fixed number of queries, whatever the row count."""

from __future__ import annotations

import pytest

from deposits.services import deposit_record_events
from tests import factories as f
from tests.factories import event

pytestmark = pytest.mark.django_db

A = f.address


def grow(dataset, n: int) -> None:
    """Add n of everything: LATs with tokens, nodes with assets, operators, deposits, snapshots."""
    for i in range(n):
        lat = f.LatFactory(avs=dataset.avs)
        for _ in range(2):
            f.LatTokenFactory(lat=lat)
        node = f.StakerNodeFactory(lat=dataset.eth_lat, operator=f.OperatorFactory())
        f.NodeAssetFactory(
            node=node,
            token=dataset.steth,
            strategy_address=A(0x5001),
            staked_amount=10**18,
            core_shares=10**18,
        )
        f.NodeAssetFactory(
            node=node,
            token=dataset.usdx,
            strategy_address=A(0x5002),
            staked_amount=10**6,
            core_shares=10**6,
        )
        extra = f.StakerNodeFactory(lat=dataset.eth_lat, operator=dataset.op1)
        f.NodeAssetFactory(
            node=extra,
            token=dataset.steth,
            strategy_address=A(0x5001),
            staked_amount=10**18,
            core_shares=10**18,
        )
        deposit_record_events(lat=dataset.eth_lat, events=[event(1000 + i, 0), event(1000 + i, 1)])


PATHS = [
    "/lat",
    "/lat?withGrouping=true",
    f"/lat/{A(0x1001)}?withTvl=true&withCuratedMetadata=true&withRewards=true",
    f"/lat/{A(0x1001)}/tokens",
    "/lat/assets",
    "/lat/operators",
    f"/lat/operators/{A(0x901)}?withTvl=true",
    f"/lat/{A(0x1001)}/operators?withTvl=true",
    f"/lat/{A(0x1001)}/staker-nodes",
    f"/lat/exchange/{A(0x1001)}",
    f"/lat/exchange/{A(0x5E)}",
    f"/lat/{A(0x1001)}/fees",
    f"/lat/avs/{A(0xA1)}",
    f"/metrics/historical/lat/{A(0x1001)}?startAt=2026-01-01&endAt=2026-06-01",
    "/metrics/deposits?take=100",
    f"/metrics/deposits?take=100&liquidTokenAddress={A(0x1001)}",
]


def count_queries(api, path, django_assert_max_num_queries, limit):
    with django_assert_max_num_queries(limit) as captured:
        response = api.get(path)
    assert response.status_code == 200, response.content
    return len(captured.captured_queries)


@pytest.mark.parametrize("path", PATHS)
def test_query_count_does_not_grow_with_rows(api, dataset, path, django_assert_max_num_queries):
    grow(dataset, 1)
    small = count_queries(api, path, django_assert_max_num_queries, 10)
    grow(dataset, 8)
    large = count_queries(api, path, django_assert_max_num_queries, small)
    assert large == small
