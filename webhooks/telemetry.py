"""The webhooks' Prometheus metrics.

Counted by the dispatcher (process-local; added up across processes with
PROMETHEUS_MULTIPROC_DIR, README "Monitoring"):
- `lat_webhook_deliveries_total{outcome}`: attempts by what they made of their delivery:
  delivered, retry (scheduled again), failed (final).
- `lat_webhook_attempt_duration_seconds`: attempts' durations, whatever their outcome.

Read from the database at scrape time (WebhookQueueCollector), the same whichever process
answers:
- `lat_webhook_queue_depth{stage}`: outbox rows not fanned out yet (`outbox`), deliveries
  pending (`deliveries`).
- `lat_webhook_oldest_pending_seconds`: age of the oldest delivery due and not delivered, or of
  the oldest outbox row not fanned out (0 when none).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

from django.db import DatabaseError
from django.db.models import Min
from django.utils import timezone
from prometheus_client import Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from webhooks.models import Delivery, OutboxEvent
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


def queue_lag() -> dict[str, float]:
    """Rows waiting, and the age in seconds of the oldest (0 when none)."""
    now = timezone.now()
    outbox = OutboxEvent.objects.filter(fanned_out_at__isnull=True)
    pending = Delivery.objects.filter(status=Delivery.Status.PENDING, next_attempt_at__lte=now)
    oldest = [
        outbox.aggregate(at=Min("created_at"))["at"],
        pending.aggregate(at=Min("next_attempt_at"))["at"],
    ]
    ages = [(now - at).total_seconds() for at in oldest if at is not None]
    return {
        "outbox": outbox.count(),
        "deliveries": Delivery.objects.filter(status=Delivery.Status.PENDING).count(),
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
            "Webhook work waiting: outbox rows not fanned out, deliveries pending.",
            labels=["stage"],
        )
        depth.add_metric(["outbox"], lag["outbox"])
        depth.add_metric(["deliveries"], lag["deliveries"])
        yield depth
        yield GaugeMetricFamily(
            "lat_webhook_oldest_pending_seconds",
            "Age of the oldest webhook event or delivery due and not sent (0 when none).",
            value=lag["oldest_seconds"],
        )
