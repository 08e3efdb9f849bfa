"""Retention (extensions.md, "Webhooks"): the feed's events are kept PUSH_RETENTION_DAYS and
deliveries with their attempts and history DELIVERY_RETENTION_DAYS, then deleted by the beat's
jobs in batches, each batch its own transaction (counted here by a trigger that records the
transaction of every row deleted); a deliveries cursor older than what is kept is answered
plainly (410, the error body), never with a silent gap."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from core.api.cursors import cursor_encode
from sync.tasks import prune_push_deliveries, prune_push_outbox
from tests.webhooks.conftest import register
from webhooks.api.views import DELIVERY_CURSOR_VERSION
from webhooks.models import Attempt, Delivery, Endpoint, OutboxEvent
from webhooks.outbox import payload

pytestmark = pytest.mark.django_db(transaction=True)

_TABLES = ("webhooks_outboxevent", "webhooks_delivery")
_CREATE = """
CREATE TABLE test_deleted (tbl text NOT NULL, xid bigint NOT NULL);
CREATE FUNCTION test_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO test_deleted VALUES (TG_TABLE_NAME, txid_current());
    RETURN NULL;
END $$;
""" + "".join(
    f"CREATE TRIGGER test_deleted AFTER DELETE ON {t} FOR EACH ROW "
    "EXECUTE FUNCTION test_deleted();\n"
    for t in _TABLES
)
_DROP = "".join(f"DROP TRIGGER IF EXISTS test_deleted ON {t};\n" for t in _TABLES) + (
    "DROP FUNCTION IF EXISTS test_deleted();\nDROP TABLE IF EXISTS test_deleted;\n"
)


@pytest.fixture
def transactions() -> Iterator[Callable[[str], int]]:
    """transactions(table): how many transactions deleted rows of the table."""
    with connection.cursor() as cursor:
        cursor.execute(_CREATE)

    def count(table: str) -> int:
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(DISTINCT xid) FROM test_deleted WHERE tbl = %s", [table])
            return cursor.fetchone()[0]

    try:
        yield count
    finally:
        with connection.cursor() as cursor:
            cursor.execute(_DROP)


def event(age_days: float, n: int, **fields) -> OutboxEvent:
    message_id = f"evt_retention_{n}"
    row = OutboxEvent.objects.create(
        event_id=message_id,
        type=fields.pop("type", "deposit"),
        payload=payload(message_id, "deposit", {"n": n}),
        fanned_out_at=timezone.now(),
        **fields,
    )
    OutboxEvent.objects.filter(id=row.id).update(
        created_at=timezone.now() - timedelta(days=age_days)
    )
    return row


def delivery(endpoint: Endpoint, row: OutboxEvent, age_days: float) -> Delivery:
    """A delivery (saved twice: two history rows) with two attempts, `age_days` old."""
    at = timezone.now() - timedelta(days=age_days)
    made = Delivery.objects.create(endpoint=endpoint, event=row, next_attempt_at=at)
    made.status = Delivery.Status.DELIVERED
    made.save()
    for code in (500, 200):
        made.attempts.create(at=at, status_code=code, duration_ms=5)
    Delivery.objects.filter(id=made.id).update(created_at=at)
    made.history.update(history_date=at)
    return made


@pytest.fixture
def endpoint(keyed, receiver) -> Endpoint:
    return Endpoint.objects.get(public_id=register(keyed, receiver().url())["id"])


def test_the_jobs_delete_what_is_older_than_kept_in_batches(settings, endpoint, transactions):
    settings.PUSH_RETENTION_DAYS, settings.DELIVERY_RETENTION_DAYS = 30, 14
    settings.RETENTION_BATCH = 4
    ping = event(40, 0, type="ping", endpoint=endpoint)
    ages = [40] * 5 + [20] * 2 + [1] * 3  # days, oldest first
    rows = [event(age, n) for n, age in enumerate(ages, 1)]
    # A reorg's removal (one day old) of an event that is deleted (40 days old).
    removal = event(1, 99, type="eventRemoved", removes=rows[1])
    deliveries = [delivery(endpoint, row, age) for row, age in zip(rows, ages, strict=True)]
    young = [d.id for d, age in zip(deliveries, ages, strict=True) if age < 14]
    assert len(young) == 3

    pruned = prune_push_deliveries()  # the 40- and 20-day-old ones
    assert (pruned["deleted"], pruned["attempts"], pruned["history"]) == (7, 14, 14)
    assert sorted(Delivery.objects.values_list("id", flat=True)) == young
    assert sorted(set(Attempt.objects.values_list("delivery_id", flat=True))) == young
    assert Attempt.objects.count() == 6
    history = Delivery.history.model.objects
    assert sorted(set(history.values_list("id", flat=True))) == young
    assert transactions("webhooks_delivery") == 2  # 7 deliveries, 4 a batch

    assert prune_push_outbox()["deleted"] == 6  # the ping and the five 40-day-old events
    kept = [r.id for r in rows[5:]] + [removal.id]
    assert sorted(OutboxEvent.objects.values_list("id", flat=True)) == kept
    assert not OutboxEvent.objects.filter(id=ping.id).exists()
    removal.refresh_from_db()
    assert removal.removes_id is None  # the event it withdrew is gone; its id is in the payload
    assert removal.payload["id"] == "evt_retention_99"
    assert transactions("webhooks_outboxevent") == 2  # 6 rows, 4 a batch

    assert prune_push_deliveries()["deleted"] == prune_push_outbox()["deleted"] == 0  # done


def test_a_deliveries_cursor_older_than_kept_is_410_gone(settings, keyed, endpoint):
    settings.DELIVERY_RETENTION_DAYS = 14
    ages = [20] * 4 + [1] * 3
    made = [delivery(endpoint, event(age, n), age) for n, age in enumerate(ages)]
    path = f"/webhooks/{endpoint.public_id}/deliveries"
    first = keyed.get(path, {"take": 2}).json()
    second = keyed.get(path, {"take": 2, "cursor": first["meta"]["next"]}).json()
    assert [d["id"] for d in first["data"] + second["data"]] == [d.id for d in made[::-1][:4]]

    before_any = keyed.get(path, {"cursor": cursor_encode(DELIVERY_CURSOR_VERSION, 0)})
    assert before_any.status_code == 200  # nothing deleted yet: no cursor is gone

    assert prune_push_deliveries()["deleted"] == 4
    # The second page's cursor names a delivery that is gone: said plainly.
    gone = keyed.get(path, {"take": 2, "cursor": second["meta"]["next"]})
    assert gone.status_code == 410
    error = gone.json()["error"]
    assert error["code"] == "gone"
    assert error["doc_url"] == "/docs/errors#gone"
    assert "14 days" in error["message"]
    assert "first page" in error["message"]
    # The first page's cursor names one still kept: the listing goes on to the oldest kept.
    rest = keyed.get(path, {"take": 2, "cursor": first["meta"]["next"]}).json()
    assert [d["id"] for d in rest["data"]] == [made[4].id]
    assert rest["meta"]["next"] is None
