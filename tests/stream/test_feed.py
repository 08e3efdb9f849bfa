"""The stream's reads of the stored feed (stream/feed.py)."""

from __future__ import annotations

import pytest

from stream.feed import feed_after
from webhooks.models import OutboxEvent
from webhooks.outbox import Filters

pytestmark = pytest.mark.django_db

RARE = "0x" + "c3" * 20
OTHER = "0x" + "d4" * 20


def test_a_rare_wallet_is_selected_by_the_database_not_by_reading_every_row(dataset):
    """Two rows of 1,200 name the wallet: one read of 500 rows at most finds both, and says
    that nothing follows (reading every row in Python took three reads, and the first found
    one)."""
    rows = OutboxEvent.objects.bulk_create(
        OutboxEvent(
            event_id=f"evt_wallet_{i}",
            type="transfer",
            lat=dataset.eth_lat,
            wallets=[RARE, OTHER] if i in (100, 1100) else [OTHER],
            payload={"id": f"evt_wallet_{i}", "type": "transfer", "data": {}},
        )
        for i in range(1200)
    )
    named = [rows[100].id, rows[1100].id]
    messages, last, more = feed_after(0, filters=Filters(wallets=frozenset({RARE})), limit=500)
    assert [m.id for m in messages] == named
    assert (last, more) == (named[-1], False)
    messages, _, _ = feed_after(0, filters=Filters(wallets=frozenset({OTHER})), limit=500)
    assert [m.id for m in messages] == [row.id for row in rows[:500]]
