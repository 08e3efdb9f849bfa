"""The claim's plan on PostgreSQL: driven by the ids it claims, whatever the statistics say.

Statistics taken while no delivery was pending (between bursts, as autovacuum's analyze takes
them) made the planner walk the due index and join the claimed ids to every pending row it
found: a burst's claims slowed to a tenth of what they were once the statistics were right."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone
from rest_framework_api_key.models import APIKey

from core.db import pg_array
from webhooks.models import Delivery, Endpoint, OutboxEvent
from webhooks.services import _CLAIM
from webhooks.signing import secret_new

ROWS = 5000


def _rows(endpoint: Endpoint, status: str, first: int) -> list[int]:
    """ROWS outbox events and one delivery each to `endpoint` in `status`, due now."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"""INSERT INTO {OutboxEvent._meta.db_table}
                (event_id, type, wallets, payload, created_at, removed)
            SELECT 'evt_plan_' || i, 'deposit', '[]', '{{}}', now(), false
            FROM generate_series(%s, %s) i""",
            [first, first + ROWS - 1],
        )
        cursor.execute(
            f"""INSERT INTO {Delivery._meta.db_table} (endpoint_id, event_id, status,
                attempt_count, next_attempt_at, created_at, updated_at)
            SELECT %s, o.id, %s, 0, now() - interval '1 s', now(), now()
            FROM {OutboxEvent._meta.db_table} o
            WHERE o.event_id LIKE 'evt_plan_%%' AND o.id NOT IN (
                SELECT event_id FROM {Delivery._meta.db_table})
            RETURNING id""",
            [endpoint.id, status],
        )
        return sorted(row[0] for row in cursor.fetchall())


def _index_names(plan: dict) -> set[str]:
    found = {plan["Index Name"]} if "Index Name" in plan else set()
    for child in plan.get("Plans", []):
        found |= _index_names(child)
    return found


@pytest.mark.django_db
def test_the_claim_reads_its_ids_by_key_whatever_the_statistics_say():
    key, _ = APIKey.objects.create_key(name="plan")
    endpoint = Endpoint.objects.create(
        public_id="wh_plan", api_key=key, url="https://example.com/hook", secret=secret_new()
    )
    _rows(endpoint, Delivery.Status.DELIVERED, 1)
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {Delivery._meta.db_table}")  # nothing pending
    pending = _rows(endpoint, Delivery.Status.PENDING, ROWS + 1)
    claimed = pending[-20:]  # the newest: the due index reaches them last
    now, lease = timezone.now(), timezone.now() + timedelta(minutes=2)
    with connection.cursor() as cursor:
        cursor.execute(
            "EXPLAIN (ANALYZE, FORMAT JSON) " + _CLAIM,
            [lease, lease, pg_array(claimed), now],
        )
        (explained,) = cursor.fetchone()
    plan = (json.loads(explained) if isinstance(explained, str) else explained)[0]["Plan"]
    used = _index_names(plan)
    assert "webhooks_delivery_pkey" in used
    assert not used & {"delivery_due_idx", "delivery_endpoint_due_idx"}
    assert set(Delivery.objects.filter(leased_until=lease).values_list("id", flat=True)) == set(
        claimed
    )
