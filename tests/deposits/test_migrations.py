"""Migrations deposits 0005 and 0006 on stored deposits: the counts are filled from the rows,
and going back ranks the rows densely again as `seq` did."""

from __future__ import annotations

import datetime as dt

import pytest

from tests import factories as f
from tests.migrating import leaves, migrate
from tests.storedcounts import assert_deposit_counts_match_rows

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.xdist_group("migrations")]

BEFORE = [("deposits", "0004_holder_buckets")]
AFTER = [("deposits", "0006_deposit_span_totals")]


def test_counts_filled_and_seq_back(dataset):
    old = migrate(BEFORE).get_model("deposits", "Deposit")
    other = f.LatFactory(chain_id=1)
    rows = [(dataset.eth_lat, 9000 + 3 * i, i % 3, 0xE1 + i % 4) for i in range(40)]
    rows += [(other, 5 + 7 * i, 1, 0xE9) for i in range(25)]  # another chain, older blocks
    for seq, (lat, block, log, sender) in enumerate(rows, start=1):
        old.objects.create(
            lat_id=lat.id,
            chain_id=lat.chain_id,
            seq=seq,  # not in listing order: the migration back must rank them again
            tx_hash=f"0x{block:032x}{log:032x}",
            log_index=log,
            block_number=block,
            block_hash=f"0x{block:064x}",
            created_at=dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
            sender=f.address(sender),
            receiver=f.address(0xE2),
            asset=f.address(0x5E + block % 2),
            amount=1,
            shares=1,
        )
    try:
        migrate(AFTER)
        assert_deposit_counts_match_rows()
        back = migrate(BEFORE).get_model("deposits", "Deposit")
        ranked = back.objects.order_by("seq").values_list("seq", "block_number", "log_index")
        keys = sorted((block, log, lat.chain_id) for lat, block, log, _ in rows)
        assert [(s, b, lg) for s, b, lg in ranked] == [
            (i, b, lg) for i, (b, lg, _) in enumerate(keys, start=1)
        ]
    finally:
        migrate(leaves())
