"""The webhooks' Prometheus metrics.

Counted by the dispatcher (process-local; added up across processes with
PROMETHEUS_MULTIPROC_DIR, README "Monitoring"):
- `lat_webhook_deliveries_total{outcome}`: attempts by what they made of their delivery:
  delivered, retry (scheduled again), failed (final).
- `lat_webhook_attempt_duration_seconds`: attempts' durations, whatever their outcome.

Read from the database at scrape time (WebhookQueueCollector), the same whichever process
answers:
- `lat_webhook_queue_depth{stage}`: outbox rows not fanned out yet (`outbox`), deliveries
  pending that can be sent (`deliveries`), deliveries pending that cannot be sent now (`held`:
  their endpoint, or its API key, is disabled, or the key expired).
- `lat_webhook_oldest_pending_seconds`: age of the oldest delivery due that can be sent, or of
  the oldest outbox row not fanned out (0 when none).

Only what can still be sent is a backlog (extensions.md, "Webhooks", Retention): a disabled
endpoint's deliveries wait for it to be enabled again, and would otherwise keep `/health`
degraded for as long as it stays disabled.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import datetime

from django.db import DatabaseError
from django.db.models import Min, Q
from django.utils import timezone
from prometheus_client import Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from webhooks.models import Delivery, Endpoint, OutboxEvent
from webhooks.sending import AttemptResult

logger = logging.getLogger(__name__)

DELIVERIES = Counter(
    "lat_webhook_deliveries",
    "Webhook attempts by outcome: delivered, retry (scheduled again), failed (final).",
    ["outcome"],
)
ATTEMPT_DURATION = Histogram(
    "lat_webhook_attempt_duration_seconds",
    "Durations of webhook attempts (connect to the last byte read), whatever their outcome.",
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)


def attempt_recorded(status: str, result: AttemptResult) -> None:
    outcome = "retry" if status == Delivery.Status.PENDING else status
    DELIVERIES.labels(outcome).inc()
    ATTEMPT_DURATION.observe(result.duration_ms / 1000)


def sendable(now: datetime) -> Q:
    """Endpoints that may be sent to at `now`: enabled, of an API key neither revoked nor
    expired."""
    return Q(enabled=True, api_key__revoked=False) & (
        Q(api_key__expiry_date__isnull=True) | Q(api_key__expiry_date__gt=now)
    )


def queue_lag() -> dict[str, float]:
    """Rows waiting that can still be sent, and the age in seconds of the oldest (0 when
    none); `held`: pending deliveries that cannot be sent now (not a backlog). The endpoints
    that cannot be sent to are read first (few: endpoints are per key), so that the pending
    deliveries are read through their own index, with no join per row."""
    now = timezone.now()
    held_endpoints = list(Endpoint.objects.exclude(sendable(now)).values_list("id", flat=True))
    outbox = OutboxEvent.objects.filter(fanned_out_at__isnull=True)
    pending = Delivery.objects.filter(status=Delivery.Status.PENDING)
    held = pending.filter(endpoint_id__in=held_endpoints).count() if held_endpoints else 0
    oldest = [
        outbox.aggregate(at=Min("created_at"))["at"],
        pending.filter(next_attempt_at__lte=now)
        .exclude(endpoint_id__in=held_endpoints)
        .aggregate(at=Min("next_attempt_at"))["at"],
    ]
    ages = [(now - at).total_seconds() for at in oldest if at is not None]
    return {
        "outbox": outbox.count(),
        "deliveries": pending.count() - held,
        "held": held,
        "oldest_seconds": max([0.0, *ages]),
    }


class WebhookQueueCollector(Collector):
    def collect(self) -> Iterator[Metric]:
        try:
            lag = queue_lag()
        except DatabaseError:
            logger.warning("webhook queue metrics: the database could not be read")
            return
        depth = GaugeMetricFamily(
            "lat_webhook_queue_depth",
            "Webhook work waiting: outbox rows not fanned out, deliveries pending that can be "
            "sent, deliveries held (their endpoint or API key disabled, or the key expired).",
            labels=["stage"],
        )
        depth.add_metric(["outbox"], lag["outbox"])
        depth.add_metric(["deliveries"], lag["deliveries"])
        depth.add_metric(["held"], lag["held"])
        yield depth
        yield GaugeMetricFamily(
            "lat_webhook_oldest_pending_seconds",
            "Age of the oldest webhook event or delivery due and not sent (0 when none).",
            value=lag["oldest_seconds"],
        )
