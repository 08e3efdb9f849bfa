"""Deposit writes and the listing's order (deposits/services.py, deposits/selectors.py): rows
are never renumbered, and the counts per filter and per span that give `meta.total` and the
deep pages stay equal to the rows, through backfills and reorg removals."""

from __future__ import annotations

import random
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection
from django.db.models import F

from deposits import selectors
from deposits.models import Deposit, DepositCount, DepositSpan
from deposits.services import deposit_record_events, deposit_remove_from_block
from lats.models import Lat
from tests import factories as f
from tests.factories import event
from tests.storedcounts import assert_deposit_counts_match_rows

pytestmark = pytest.mark.django_db

A = f.address


@pytest.fixture
def small_spans(monkeypatch):
    """Spans of 4 blocks and deep paging from the first skip, so that a few dozen deposits
    cross many spans."""
    monkeypatch.setattr(DepositSpan, "SPAN_BLOCKS", 4)
    monkeypatch.setattr(selectors, "SHALLOW_SKIP", 1)


@pytest.fixture
def three_lats(dataset):
    """eLAT and the native LAT on chain 31337 and a LAT on chain 1, with interleaved blocks
    (the same block numbers on both chains too) and several deposits per block."""
    other = f.LatFactory(chain_id=1, proxy_address=A(0x1003), symbol="cLAT")
    rng = random.Random(7)
    for lat, blocks in ((dataset.eth_lat, range(3, 60, 2)), (dataset.native_lat, range(4, 40, 4))):
        events = [
            event(b, log, sender=rng.choice((0xE1, 0xE3)), receiver=rng.choice((0xE2, 0xE1)))
            for b in blocks
            for log in range(rng.randint(1, 3))
        ]
        deposit_record_events(lat=lat, events=events)
    deposit_record_events(lat=other, events=[event(b, 0, asset=0x6D) for b in range(10, 50, 5)])
    dataset.other_lat = other
    return dataset


def expected(**filters) -> list[tuple[int, int, int]]:
    """The listing's keys newest first, sorted here from the rows."""
    rows = Deposit.objects.filter(**filters).values_list("block_number", "log_index", "chain_id")
    return sorted(rows, reverse=True)


def keys(page: selectors.DepositPage, dataset) -> list[tuple[int, int, int]]:
    chain = dict(Lat.objects.values_list("proxy_address", "chain_id"))
    return [(r["createdAtBlock"], r["logIndex"], chain[r["liquidTokenAddress"]]) for r in page.rows]


def test_every_skip_gives_the_sorted_listing(small_spans, three_lats):
    want = expected()
    assert len(want) > 60
    for take in (1, 5, 12):
        for skip in range(len(want) + 2):
            page = selectors.deposit_page(skip=skip, take=take, filters={})
            assert keys(page, three_lats) == want[skip : skip + take], (skip, take)
            assert page.total == len(want)
            assert (page.next is not None) == (skip + take < len(want))


def test_every_skip_of_one_lat(small_spans, three_lats):
    lat = three_lats.eth_lat
    want = expected(lat=lat)
    filters = {"liquidTokenAddress": lat.proxy_address}
    for skip in range(len(want) + 1):
        page = selectors.deposit_page(skip=skip, take=4, filters=filters)
        assert keys(page, three_lats) == want[skip : skip + 4], skip
        assert page.total == len(want)


@pytest.mark.parametrize(
    ("filters", "lookups"),
    [
        ({"sender": A(0xE3)}, {"sender": A(0xE3)}),
        ({"receiver": A(0xE1)}, {"receiver": A(0xE1)}),
        ({"asset": A(0x6D)}, {"asset": A(0x6D)}),
        ({"sender": A(0xE1), "receiver": A(0xE1)}, {"sender": A(0xE1), "receiver": A(0xE1)}),
    ],
)
def test_filtered_pages_by_skip_and_by_cursor(small_spans, three_lats, filters, lookups):
    want = expected(**lookups)
    assert len(want) >= 8
    for skip in range(len(want) + 1):
        page = selectors.deposit_page(skip=skip, take=3, filters=filters)
        assert keys(page, three_lats) == want[skip : skip + 3]
        assert page.total == len(want)
    followed, after = [], None
    while True:
        page = selectors.deposit_page(skip=0, take=3, filters=filters, after=after)
        followed += keys(page, three_lats)
        if page.next is None:
            break
        after = page.next
    assert followed == want


def test_unknown_lat_filter_is_empty(three_lats):
    page = selectors.deposit_page(skip=0, take=12, filters={"liquidTokenAddress": A(0xDEAD)})
    assert (page.rows, page.total, page.next) == ([], 0, None)


@pytest.mark.skipif(connection.vendor != "postgresql", reason="reads PostgreSQL's xmin")
def test_backfill_of_older_history_rewrites_no_row(dataset):
    """A LAT whose history lies below every stored deposit only adds rows: the stored rows keep
    their row versions (PostgreSQL's xmin moves on any UPDATE)."""
    deposit_record_events(lat=dataset.eth_lat, events=[event(1000 + i, 0) for i in range(20)])
    with connection.cursor() as cursor:
        cursor.execute("SELECT id, xmin::text FROM deposits_deposit ORDER BY id")
        before = cursor.fetchall()
    deposit_record_events(lat=dataset.native_lat, events=[event(10 + i, 1) for i in range(30)])
    with connection.cursor() as cursor:
        cursor.execute("SELECT id, xmin::text FROM deposits_deposit ORDER BY id")
        after = cursor.fetchall()
    assert after[: len(before)] == before
    assert len(after) == 50
    page = selectors.deposit_page(skip=19, take=2, filters={})
    assert [(r["createdAtBlock"], r["logIndex"]) for r in page.rows] == [(1000, 0), (39, 1)]


def test_counts_follow_inserts_repeats_and_reorg_removals(small_spans, three_lats):
    assert_deposit_counts_match_rows()
    lat = three_lats.eth_lat
    # Recording the same events again adds nothing.
    assert deposit_record_events(lat=lat, events=[event(3, 0), event(5, 0)]) == 0
    assert_deposit_counts_match_rows()
    doomed = Deposit.objects.filter(lat=lat, block_number__gte=31).count()
    assert deposit_remove_from_block(lat=lat, block_number=31) == doomed > 0
    assert_deposit_counts_match_rows()
    assert deposit_record_events(lat=lat, events=[event(31, 5, sender=0xE9), event(33, 0)]) == 2
    assert_deposit_counts_match_rows()
    total = Deposit.objects.count()
    assert selectors.deposit_page(skip=0, take=1, filters={}).total == total
    assert selectors.deposit_total() == total


def test_recount_rebuilds_the_counts(small_spans, three_lats):
    DepositCount.objects.all().update(n=F("n") + 5)  # counts gone wrong (a repair by hand)
    DepositSpan.objects.filter(lat=three_lats.eth_lat).delete()
    lat = three_lats.eth_lat
    call_command("lat_recount_deposits", "--lat", lat.proxy_address.lower(), stdout=StringIO())
    mine = Deposit.objects.filter(lat=lat).count()
    assert DepositCount.objects.get(lat=lat, field="").n == mine
    assert DepositCount.objects.get(lat=three_lats.native_lat, field="").n == (
        Deposit.objects.filter(lat=three_lats.native_lat).count() + 5
    )
    out = StringIO()
    call_command("lat_recount_deposits", stdout=out)
    assert out.getvalue().strip() == f"counted {Deposit.objects.count()} deposits"
    assert_deposit_counts_match_rows()
