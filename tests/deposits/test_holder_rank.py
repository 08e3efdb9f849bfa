"""The holders' rank buckets (deposits.models.HolderBucket) and the pages read through them.

Balances are made by hand around the buckets' boundaries (a bucket keeps a balance's five
leading binary digits), with ties, uint256 extremes and one crowded bucket; the expected
order is the sorted list of those balances, and the expected bucket counts are worked out
here from the balances' binary digits, never from the service's functions.
"""

from __future__ import annotations

import importlib
from collections import Counter
from types import SimpleNamespace

import pytest
from django.apps import apps
from django.db import connection

from activity import selectors as activity_selectors
from activity import store as activity
from activity.selectors import holder_page
from activity.store import activity_record, activity_remove_from_block
from deposits.models import HolderBucket, HolderTally
from tests import factories as f

pytestmark = pytest.mark.django_db

A = f.address
Z = A(0)
UINT_MAX = 2**256 - 1

# Around the boundaries: 31|32 (where buckets stop being single balances), 2^k - 1 | 2^k,
# (17 << s) - 1 | 17 << s (inside one power of two), the largest balances; ties at 10^18.
HAND_MADE = [
    *range(1, 36),
    *(v for k in (6, 7, 40, 64, 70) for v in (2**k - 1, 2**k, 2**k + 1)),
    *(v for s in (1, 9, 60) for v in ((17 << s) - 1, 17 << s, (18 << s) - 1)),
    UINT_MAX,
    2**255,
    2**200 + 12_345,
    *[10**18] * 25,
    *[2**70] * 3,
]


def key_by_digits(balance: int) -> int:
    """A balance's bucket: its five leading binary digits (the mantissa, 16..31) and how many
    digits follow them (the shift) as shift * 16 + mantissa; below 32, the balance itself."""
    digits = bin(balance)[2:]
    if len(digits) <= 5:
        return balance
    return (len(digits) - 5) * 16 + int(digits[:5], 2)


def expected_buckets(balances: dict[str, int]) -> dict[int, int]:
    return dict(Counter(key_by_digits(b) for b in balances.values() if b > 0))


def stored_buckets(lat) -> dict[int, int]:
    return dict(HolderBucket.objects.filter(lat=lat).values_list("key", "holders"))


def expected_order(balances: dict[str, int]) -> list[tuple[str, int]]:
    holding = [(a.lower(), b) for a, b in balances.items() if b > 0]
    return sorted(holding, key=lambda row: (-row[1], row[0]))


def assert_every_page(lat, balances: dict[str, int], takes=(1, 5, 12)) -> None:
    """Every skip from 0 to two past the end, at several page sizes, equals the sorted
    balances; addresses served in their EIP-55 form."""
    order = expected_order(balances)
    checksummed = {a.lower(): a for a in balances}
    for take in takes:
        for skip in range(len(order) + 2):
            rows, total = holder_page(lat_address=lat.proxy_address, skip=skip, take=take)
            assert total == len(order)
            page = order[skip : skip + take]
            assert rows == [{"address": checksummed[a], "balance": str(b)} for a, b in page], (
                skip,
                take,
            )


def mint_all(lat, balances: dict[str, int], block: int = 10) -> None:
    logs = [f.transfer_log(block, i, Z, a, b) for i, (a, b) in enumerate(balances.items())]
    activity_record(lat=lat, logs=logs, timestamps={block: 1_700_000_000})


def apply(balances: dict[str, int], moves: list[tuple[str, str, int]]) -> dict[str, int]:
    """The balances after moves (from, to, value), the zero address minting and burning."""
    after = dict(balances)
    for sender, receiver, value in moves:
        if sender != Z:
            after[sender] -= value
        if receiver != Z:
            after[receiver] = after.get(receiver, 0) + value
    return after


@pytest.fixture
def deep(monkeypatch):
    """Every skip read through the buckets (the shallow pages' plain OFFSET is for skips
    below SHALLOW_SKIP, more than these tests' holders)."""
    monkeypatch.setattr(activity_selectors, "SHALLOW_SKIP", 0)


@pytest.fixture
def hand_made(dataset):
    balances = {A(0x1000 + i): b for i, b in enumerate(HAND_MADE)}
    mint_all(dataset.eth_lat, balances)
    return dataset.eth_lat, balances


def test_key_by_digits_agrees_with_the_boundaries_worked_out_by_hand():
    # The helper the expectations rest on, checked against values written out: 32 = 0b100000
    # is mantissa 16 shift 1, 34 = 0b100010 mantissa 17 shift 1, 64 = mantissa 16 shift 2.
    pairs = [(1, 1), (31, 31), (32, 32), (33, 32), (34, 33), (63, 47), (64, 48), (67, 48)]
    assert [key_by_digits(b) for b, _ in pairs] == [k for _, k in pairs]
    assert key_by_digits(UINT_MAX) == 251 * 16 + 31
    assert key_by_digits(10**18) == 55 * 16 + 0b11011  # 10^18 = 0b11011_110... (60 digits)


def test_every_key_ceiling_in_sql_bounds_its_bucket():
    """The pages' upper balance of a bucket, computed in SQL, is the first balance of the next
    key: one below it is still in the bucket (uint256's largest, for the last key)."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT key, {activity_selectors.BUCKET_CEILING_SQL}"
            " FROM generate_series(1, 4047) AS key ORDER BY key"
        )
        ceilings = [(key, int(ceiling)) for key, ceiling in cursor.fetchall()]
    assert len(ceilings) == 4047
    for key, ceiling in ceilings:
        assert key_by_digits(ceiling - 1) == key
        assert ceiling == 2**256 if key == 4047 else key_by_digits(ceiling) == key + 1


@pytest.mark.parametrize("shallow_skip", [0, 40, activity_selectors.SHALLOW_SKIP])
def test_every_page_equals_the_sorted_balances(monkeypatch, hand_made, shallow_skip):
    monkeypatch.setattr(activity_selectors, "SHALLOW_SKIP", shallow_skip)
    lat, balances = hand_made
    assert stored_buckets(lat) == expected_buckets(balances)
    # The crowd of 25 equal balances shares one bucket with nothing else.
    assert stored_buckets(lat)[key_by_digits(10**18)] == 25
    assert_every_page(lat, balances)


def test_transfers_burns_and_a_rollback_keep_the_counts_exact(deep, hand_made):
    lat, balances = hand_made
    by_balance = {b: a for a, b in balances.items()}
    top, crowd, small, newcomer = by_balance[UINT_MAX], by_balance[10**18], by_balance[5], A(0x2000)
    block_11 = [
        (top, crowd, 2**250),  # the crowd's member jumps many buckets up; top stays in its own
        (small, Z, 5),  # a burn that empties a balance (and its single-balance bucket)
        (top, newcomer, 33),  # a new holder in the 32 bucket
        (A(0x1001), A(0x1002), 2),  # 2 -> 0 and 3 -> 5: one bucket emptied, one joined
    ]
    block_12 = [(newcomer, Z, 33), (crowd, A(0x1003), 2**250 + 10**18)]  # both empty out
    for block, moves in ((11, block_11), (12, block_12)):
        logs = [f.transfer_log(block, i, *move) for i, move in enumerate(moves)]
        activity_record(lat=lat, logs=logs, timestamps={block: 1_700_000_000 + block})
    after = apply(apply(balances, block_11), block_12)
    assert stored_buckets(lat) == expected_buckets(after)
    assert HolderTally.objects.get(lat=lat).holders == sum(b > 0 for b in after.values())
    assert_every_page(lat, after, takes=(3, 12))

    activity_remove_from_block(lat=lat, block_number=12)
    partway = apply(balances, block_11)
    assert stored_buckets(lat) == expected_buckets(partway)
    assert_every_page(lat, partway, takes=(4,))
    activity_remove_from_block(lat=lat, block_number=11)
    assert stored_buckets(lat) == expected_buckets(balances)
    assert_every_page(lat, balances, takes=(12,))


def test_api_pages_last_page_and_beyond_the_end(api, deep, hand_made):
    lat, balances = hand_made
    order = expected_order(balances)
    path = f"/lat/{lat.proxy_address}/holders"
    for skip, take in ((0, 12), (40, 12), (len(order) - 5, 12), (len(order), 12), (10**6, 3)):
        body = api.get(path, {"skip": skip, "take": take}).json()
        assert [(r["address"].lower(), int(r["balance"])) for r in body["data"]] == order[
            skip : skip + take
        ]
        assert body["meta"] == {"total": len(order), "skip": skip, "take": take}


@pytest.mark.parametrize("skip", [0, 5000])
def test_a_lat_without_holders_has_empty_pages(api, dataset, skip):
    body = api.get(f"/lat/{dataset.eth_lat.proxy_address}/holders", {"skip": skip}).json()
    assert body == {"data": [], "meta": {"total": 0, "skip": skip, "take": 12}}


def test_the_orm_paths_keep_the_same_counts_and_order(monkeypatch, dataset):
    """The SQLite demo's paths (balances and buckets read then written, pages sorted in
    Python), run here on PostgreSQL by making the indexer and the selector see another
    vendor."""
    demo = SimpleNamespace(vendor="sqlite")
    monkeypatch.setattr(activity, "connection", demo)
    monkeypatch.setattr(activity_selectors, "connection", demo)
    lat = dataset.eth_lat
    balances = {A(0x3000 + i): b for i, b in enumerate([*range(28, 40), 2**80, 2**80, 7])}
    mint_all(lat, balances)
    moves = [(A(0x3000), A(0x3001), 28), (A(0x300C), Z, 2**79), (A(0x3005), A(0x4000), 1)]
    activity_record(
        lat=lat,
        logs=[f.transfer_log(11, i, *move) for i, move in enumerate(moves)],
        timestamps={11: 1_700_000_012},
    )
    after = apply(balances, moves)
    assert stored_buckets(lat) == expected_buckets(after)
    assert_every_page(lat, after, takes=(4,))
    activity_remove_from_block(lat=lat, block_number=11)
    assert stored_buckets(lat) == expected_buckets(balances)


@pytest.mark.parametrize("vendor", ["postgresql", "sqlite"])
def test_the_migration_counts_the_stored_holders(hand_made, vendor):
    lat, balances = hand_made
    migration = importlib.import_module("deposits.migrations.0004_holder_buckets")
    HolderBucket.objects.all().delete()
    demo = SimpleNamespace(vendor=vendor)
    editor = SimpleNamespace(connection=connection if vendor == "postgresql" else demo)
    migration.count_holders_per_bucket(apps, editor)
    assert stored_buckets(lat) == expected_buckets(balances)
