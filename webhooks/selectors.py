"""Reads of the webhooks: a key's endpoints and an endpoint's deliveries with their attempts,
in the shapes of webhooks/api/serializers.py."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db.models import Prefetch
from rest_framework_api_key.models import APIKey

from core.errors import Gone, NotFound
from deposits.selectors import iso_instant
from webhooks.models import Attempt, Delivery, Endpoint, RetentionMark
from webhooks.retention import retention_horizon


def _iso(value) -> str | None:
    return None if value is None else iso_instant(value)


def endpoint_disabled_by(endpoint: Endpoint) -> str | None:
    """Who disabled the endpoint: `staff` (admin), `service` (every delivery failed for
    WEBHOOK_DISABLE_AFTER), `key` (its API key paused it); None while it is enabled."""
    if endpoint.enabled:
        return None
    return endpoint.disabled_by or Endpoint.DisabledBy.KEY


def endpoint_document(endpoint: Endpoint, *, secret: bool = False) -> dict[str, Any]:
    out = {
        "id": endpoint.public_id,
        "url": endpoint.url,
        "types": endpoint.types,
        "lats": endpoint.lats,
        "wallets": endpoint.wallets,
        "description": endpoint.description,
        "enabled": endpoint.enabled,
        "disabledBy": endpoint_disabled_by(endpoint),
        "createdAt": _iso(endpoint.created_at),
    }
    if secret:
        out["secret"] = endpoint.secret
    return out


def endpoint_documents(*, api_key: APIKey) -> list[dict[str, Any]]:
    """The key's endpoints, oldest first."""
    return [
        endpoint_document(e)
        for e in Endpoint.objects.filter(api_key=api_key).order_by("created_at", "id")
    ]


def attempt_document(attempt: Attempt) -> dict[str, Any]:
    return {
        "at": _iso(attempt.at),
        "statusCode": attempt.status_code,
        "error": attempt.error or None,
        "durationMs": attempt.duration_ms,
    }


def delivery_document(delivery: Delivery) -> dict[str, Any]:
    return {
        "id": delivery.id,
        "eventId": delivery.event.event_id,
        "type": delivery.event.type,
        "status": delivery.status,
        "nextAttemptAt": _iso(delivery.next_attempt_at)
        if delivery.status == Delivery.Status.PENDING
        else None,
        "createdAt": _iso(delivery.created_at),
        "attempts": [attempt_document(a) for a in delivery.attempts.all()],
    }


def _deliveries():
    return Delivery.objects.select_related("event").prefetch_related(
        Prefetch("attempts", queryset=Attempt.objects.order_by("-at", "-id"))
    )


def delivery_page(
    *, endpoint: Endpoint, take: int, before: int | None
) -> tuple[list[dict[str, Any]], int | None]:
    """The endpoint's deliveries newest first (by id), after the cursor's `before` id; the
    page, and the id to continue before when more follow. A cursor naming a delivery that
    retention deleted is Gone: what followed it is deleted too (webhooks/retention.py deletes
    the oldest ids first), and an empty page would hide that."""
    rows = _deliveries().filter(endpoint=endpoint).order_by("-id")
    if before is not None:
        horizon = retention_horizon(RetentionMark.Table.DELIVERIES)
        if 0 < before <= horizon:
            days = f"{settings.DELIVERY_RETENTION_DAYS:g}"
            raise Gone(
                f"cursor names deliveries older than the {days} days they are kept: they are "
                "deleted. Read the listing again from its first page (without cursor)."
            )
        rows = rows.filter(id__lt=before)
    page = list(rows[: take + 1])
    more = len(page) > take
    page = page[:take]
    return [delivery_document(d) for d in page], (page[-1].id if more else None)


def delivery_of(*, endpoint: Endpoint, delivery_id: int) -> Delivery:
    delivery = None
    if 0 < delivery_id < 2**63:
        delivery = _deliveries().filter(endpoint=endpoint, id=delivery_id).first()
    if delivery is None:
        raise NotFound(f"No delivery {delivery_id} of webhook endpoint {endpoint.public_id}.")
    return delivery
