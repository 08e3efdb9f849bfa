"""Writes of the webhooks: endpoints (create, update, delete, rotate the secret), the fan-out
of the outbox to the matching endpoints, and what an attempt makes of its delivery (the retry
schedule, the final failure, the endpoint disabled after failing for days)."""

from __future__ import annotations

import json
import logging
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone
from rest_framework_api_key.models import APIKey

from core import outbound
from core.api.params import parse_addresses
from core.errors import InvalidInput, NotFound, ServiceError
from webhooks.models import Attempt, Delivery, Endpoint, OutboxEvent
from webhooks.outbox import TYPES, Filters, outbox_ping
from webhooks.sending import AttemptResult, Signed, attempt_send, url_probe
from webhooks.signing import secret_new
from webhooks.targets import refusal, webhook_url_check

logger = logging.getLogger(__name__)

ROTATION_OVERLAP = timedelta(hours=24)  # the previous secret keeps signing beside the new one

# Why an endpoint is disabled (its disabled_reason, shown in admin): staff's names who.
STAFF_PREFIX = "Disabled by "
FAILING_PREFIX = "Every delivery failed for "
PAUSED_REASON = "Paused by its API key."
STAFF_ONLY_MESSAGE = (
    "This webhook endpoint was disabled by the service's staff: only they can enable it again."
)


class StaffOnly(ServiceError):
    """What only staff may do: enable an endpoint they disabled, or send to it meanwhile."""

    code = "forbidden"


def dispatch_lease() -> timedelta:
    """How long a delivery claimed for an attempt is held: it is sent again if the attempt was
    not recorded by then (the dispatcher died mid-attempt). settings.WEBHOOK_LEASE_SECONDS, and
    never less than twice the attempt's own deadline."""
    return timedelta(seconds=max(settings.WEBHOOK_LEASE_SECONDS, 2 * settings.WEBHOOK_TIMEOUT))


# --- endpoints ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class EndpointFields:
    """What a caller may set; None: not given (PATCH keeps the value)."""

    url: str | None = None
    types: list[str] | None = None
    lats: list[str] | None = None
    wallets: list[str] | None = None
    description: str | None = None
    enabled: bool | None = None


def _checked(fields: EndpointFields) -> dict[str, Any]:
    """The fields to store, each checked; InvalidInput naming the field (and the URL's rule)."""
    out: dict[str, Any] = {}
    if fields.types is not None:
        unknown = [t for t in fields.types if t not in TYPES]
        if unknown:
            raise InvalidInput(f"types must hold only: {', '.join(TYPES)}.")
        out["types"] = list(dict.fromkeys(fields.types))
    if fields.lats is not None:
        out["lats"] = parse_addresses(fields.lats, field="lats")
    if fields.wallets is not None:
        out["wallets"] = [a.lower() for a in parse_addresses(fields.wallets, field="wallets")]
    if fields.description is not None:
        out["description"] = fields.description
    if fields.enabled is not None:
        out["enabled"] = fields.enabled
    if fields.url is not None:  # last: it resolves the host and asks the URL
        try:
            webhook_url_check(fields.url)
            url_probe(fields.url)
        except outbound.OutboundRefused as exc:
            raise InvalidInput(refusal(exc)) from exc
        out["url"] = fields.url
    return out


def endpoint_create(*, api_key: APIKey, fields: EndpointFields) -> Endpoint:
    """A new endpoint of the key, with a new secret; InvalidInput past WEBHOOKS_PER_KEY."""
    if fields.url is None:
        raise InvalidInput("url is required.")
    values = _checked(fields)
    with transaction.atomic():
        # One creation at a time per key, so that the limit holds under concurrent requests.
        APIKey.objects.select_for_update().filter(pk=api_key.pk).first()
        limit = settings.WEBHOOKS_PER_KEY
        if Endpoint.objects.filter(api_key=api_key).count() >= limit:
            raise InvalidInput(f"An API key may have at most {limit} webhook endpoints.")
        return Endpoint.objects.create(
            public_id=f"wh_{secrets.token_hex(12)}",
            api_key=api_key,
            secret=secret_new(),
            **values,
        )


def _locked(endpoint: Endpoint) -> Endpoint:
    """The endpoint's row as it is now, locked to the end of the transaction; NotFound when it
    was deleted meanwhile. Lock order: an endpoint's row before its deliveries' (as
    endpoint_delete takes them)."""
    current = Endpoint.objects.select_for_update(no_key=True).filter(id=endpoint.id).first()
    if current is None:
        raise NotFound(f"No webhook endpoint {endpoint.public_id}.")
    return current


def _save(endpoint: Endpoint, changed: dict[str, Any]) -> None:
    """Write only the fields that change (a concurrent rotation, auto-disable or staff action
    on the others stays); its history row records the whole endpoint as it is then."""
    changed = {name: v for name, v in changed.items() if getattr(endpoint, name) != v}
    if not changed:
        return
    for name, value in changed.items():
        setattr(endpoint, name, value)
    endpoint.save(update_fields=[*changed, "updated_at"])


def endpoint_update(*, endpoint: Endpoint, fields: EndpointFields) -> Endpoint:
    """The fields given, each checked (a new URL is asked first, for up to 3 s, with no lock
    held), then written on the row as it is by then, locked: only those fields change, so a
    rotation or an auto-disable that landed during the probe stays. `enabled: true` on an
    endpoint staff disabled is StaffOnly (the whole update is refused); enabling an endpoint
    starts its failure count afresh."""
    values = _checked(fields)
    with transaction.atomic():
        current = _locked(endpoint)
        enabled = values.get("enabled")
        if enabled is not None and enabled != current.enabled:
            if enabled and endpoint_disabled_by(current) == "staff":
                raise StaffOnly(STAFF_ONLY_MESSAGE)
            values |= {"disabled_reason": "" if enabled else PAUSED_REASON}
            if enabled:
                values["failing_since"] = None
        _save(current, values)
    return current


_DELIVERY = Delivery._meta.db_table
_ATTEMPT = Attempt._meta.db_table
_OUTBOX = OutboxEvent._meta.db_table


@transaction.atomic
def endpoint_delete(*, endpoint: Endpoint) -> None:
    """The endpoint with its deliveries, their attempts and its pings, deleted by the database
    in a few statements, never read into the request (an endpoint has up to
    DELIVERY_RETENTION_DAYS of deliveries).

    Locks are taken in the order an attempt's recording takes them (its delivery, then its
    endpoint: webhooks.services.delivery_record_attempt), so neither waits for the other for
    ever: the endpoint's deliveries, then the endpoint (a fan-out naming it meanwhile waits,
    fails at its commit and is done again without it), then the deliveries again (those a
    fan-out committed in between). An attempt recorded meanwhile commits before the rows to
    delete are collected (its attempt goes with them) or finds its delivery gone (without the
    locks it outlived the delivery: a foreign-key violation, a 500). The deliveries' history
    rows are left to the retention job (webhooks/retention.py); the endpoint's own history
    records the deletion."""
    params = [endpoint.id]
    _lock_rows(f"SELECT 1 FROM {_DELIVERY} WHERE endpoint_id = %s", params)
    Endpoint.objects.select_for_update().filter(id=endpoint.id).first()
    _lock_rows(f"SELECT 1 FROM {_DELIVERY} WHERE endpoint_id = %s", params)
    with connection.cursor() as cursor:
        cursor.execute(
            f"DELETE FROM {_ATTEMPT} WHERE delivery_id IN "
            f"(SELECT id FROM {_DELIVERY} WHERE endpoint_id = %s)",
            params,
        )
        cursor.execute(f"DELETE FROM {_DELIVERY} WHERE endpoint_id = %s", params)
        cursor.execute(f"DELETE FROM {_OUTBOX} WHERE endpoint_id = %s", params)  # its pings
    endpoint.delete()  # and its history's record of the deletion


def _lock_rows(select: str, params: list[Any]) -> None:
    """Lock the rows `select` names, without reading them (PostgreSQL; SQLite has one
    writer)."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT count(*) FROM ({select} FOR UPDATE) AS locked", params)


@transaction.atomic
def endpoint_rotate_secret(*, endpoint: Endpoint) -> Endpoint:
    """A new secret; the one it replaces (as stored now, the row locked) keeps signing beside
    it for ROTATION_OVERLAP. Only the secrets are written."""
    current = _locked(endpoint)
    _save(
        current,
        {
            "previous_secret": current.secret,
            "previous_secret_until": timezone.now() + ROTATION_OVERLAP,
            "secret": secret_new(),
        },
    )
    return current


@transaction.atomic
def endpoint_staff_update(*, endpoint: Endpoint, values: dict[str, Any]) -> Endpoint:
    """Fields staff changed in admin, written alone on the locked row."""
    current = _locked(endpoint)
    _save(current, values)
    return current


@transaction.atomic
def endpoint_staff_disable(*, endpoint: Endpoint, by: str) -> Endpoint:
    """Disabled by staff (admin): only staff enable it again; `by` names who, in admin."""
    current = _locked(endpoint)
    reason = f"{STAFF_PREFIX}{by}."[: Endpoint._meta.get_field("disabled_reason").max_length]
    if current.enabled or endpoint_disabled_by(current) != "staff":
        _save(current, {"enabled": False, "disabled_reason": reason})
    return current


@transaction.atomic
def endpoint_staff_enable(*, endpoint: Endpoint) -> Endpoint:
    """Enabled by staff (admin), whoever disabled it; its failure count starts afresh."""
    current = _locked(endpoint)
    if not current.enabled:
        _save(current, {"enabled": True, "disabled_reason": "", "failing_since": None})
    return current


def endpoint_disabled_by(endpoint: Endpoint) -> str | None:
    """Who disabled the endpoint: `staff` (admin), `service` (every delivery failed for
    WEBHOOK_DISABLE_AFTER), `key` (its API key paused it); None while it is enabled."""
    if endpoint.enabled:
        return None
    if endpoint.disabled_reason.startswith(STAFF_PREFIX):
        return "staff"
    if endpoint.disabled_reason.startswith(FAILING_PREFIX):
        return "service"
    return "key"


def endpoint_secrets(endpoint: Endpoint, *, now: datetime | None = None) -> tuple[str, ...]:
    """The secrets that sign now: the current one, and the previous during a rotation."""
    now = now or timezone.now()
    until = endpoint.previous_secret_until
    if endpoint.previous_secret and until is not None and until > now:
        return (endpoint.secret, endpoint.previous_secret)
    return (endpoint.secret,)


def endpoint_for_key(*, api_key: APIKey, public_id: str) -> Endpoint:
    """The key's endpoint; NotFound for another key's (or none)."""
    endpoint = Endpoint.objects.filter(api_key=api_key, public_id=public_id).first()
    if endpoint is None:
        raise NotFound(f"No webhook endpoint {public_id[:64]} for this API key.")
    return endpoint


# --- fan-out ------------------------------------------------------------------------------------


def _filters(endpoint: Endpoint) -> Filters:
    return Filters(frozenset(endpoint.lats), frozenset(endpoint.types), frozenset(endpoint.wallets))


def outbox_fan_out(*, limit: int = 500) -> int:
    """One delivery per matching enabled endpoint for the oldest events not fanned out yet
    (rows another dispatcher holds are skipped); returns how many events were fanned out.
    An `eventRemoved` goes to every enabled endpoint that was sent the event it withdraws,
    whatever its `types` (or its filters changed since) say: a subscriber to deposits must hear
    that its deposit is gone (extensions.md)."""
    with transaction.atomic():
        events = list(
            OutboxEvent.objects.filter(fanned_out_at__isnull=True)
            .select_related("lat")
            .order_by("id")
            .select_for_update(skip_locked=True, of=("self",))[:limit]
        )
        if not events:
            return 0
        endpoints = list(Endpoint.objects.filter(enabled=True))
        filters = {endpoint.id: _filters(endpoint) for endpoint in endpoints}
        now = timezone.now()
        deliveries: list[Delivery] = []
        for event in events:
            if event.type == OutboxEvent.Type.EVENT_REMOVED:
                # Attempted, or pending still (in flight: the others were cancelled).
                sent_to = set(
                    Delivery.objects.filter(event_id=event.removes_id)
                    .filter(Q(attempts__isnull=False) | Q(status=Delivery.Status.PENDING))
                    .values_list("endpoint_id", flat=True)
                )
                candidates = [e for e in endpoints if e.id in sent_to]
            else:
                lat_address = event.lat.proxy_address if event.lat else None
                candidates = [
                    e
                    for e in endpoints
                    if filters[e.id].matches(event.type, lat_address, event.wallets)
                ]
            deliveries.extend(
                Delivery(endpoint=endpoint, event=event, next_attempt_at=now)
                for endpoint in candidates
            )
        Delivery.objects.bulk_create(deliveries, batch_size=1000, ignore_conflicts=True)
        OutboxEvent.objects.filter(id__in=[e.id for e in events]).update(fanned_out_at=now)
    return len(events)


# --- attempts -----------------------------------------------------------------------------------


def retry_delay(attempts: int) -> float | None:
    """Seconds from the first attempt to the next after `attempts` attempts; None: no more."""
    schedule = settings.WEBHOOK_RETRY_SCHEDULE
    return float(schedule[attempts - 1]) if attempts <= len(schedule) else None


@transaction.atomic
def delivery_record_attempt(*, delivery_id: int, at: datetime, result: AttemptResult) -> Delivery:
    """The attempt stored, and what it makes of its delivery: delivered (2xx), tried again on
    the schedule (a network error, a timeout, a 5xx, a 408, a 429 not before its Retry-After),
    or failed (anything else, or the schedule's end). An endpoint whose attempts have all failed
    for WEBHOOK_DISABLE_AFTER seconds is disabled."""
    delivery = (
        Delivery.objects.select_for_update(of=("self",))
        .select_related("endpoint", "event")
        .get(id=delivery_id)
    )
    Attempt.objects.create(
        delivery=delivery,
        at=at,
        status_code=result.status_code,
        error=result.error[:300],
        duration_ms=result.duration_ms,
        response_head=result.response_head,
    )
    delivery.attempt_count += 1
    delivery.first_attempt_at = delivery.first_attempt_at or at
    delivery.last_status_code = result.status_code
    endpoint = delivery.endpoint
    if delivery.status != Delivery.Status.PENDING:  # cancelled meanwhile (a reorg)
        delivery.save()
        return delivery
    if delivery.event.removed and not result.delivered:  # orphaned during its first attempt
        delivery.status = Delivery.Status.CANCELLED
        delivery.next_attempt_at = None
        delivery.save()
        return delivery
    now = timezone.now()
    if result.delivered:
        delivery.status = Delivery.Status.DELIVERED
        delivery.next_attempt_at = None
        if endpoint.failing_since is not None:
            Endpoint.objects.filter(id=endpoint.id).update(failing_since=None)
    else:
        delay = retry_delay(delivery.attempt_count) if result.retryable else None
        if delay is None:
            delivery.status = Delivery.Status.FAILED
            delivery.next_attempt_at = None
        else:
            due = delivery.first_attempt_at + timedelta(seconds=delay)
            if result.retry_after is not None:
                due = max(due, now + timedelta(seconds=min(result.retry_after, 86400)))
            delivery.next_attempt_at = due
        _endpoint_failed(endpoint, at=at, now=now)
    delivery.save()
    logger.info(
        "webhook attempt",
        extra={
            "event_id": delivery.event.event_id,
            "delivery_id": delivery.id,
            "endpoint": endpoint.public_id,
            "status_code": result.status_code,
            "error": result.error,
            "duration_ms": result.duration_ms,
            "outcome": delivery.status,
        },
    )
    return delivery


def _endpoint_failed(endpoint: Endpoint, *, at: datetime, now: datetime) -> None:
    since = endpoint.failing_since
    if since is None:
        Endpoint.objects.filter(id=endpoint.id, failing_since__isnull=True).update(failing_since=at)
        return
    if (now - since).total_seconds() >= settings.WEBHOOK_DISABLE_AFTER and endpoint.enabled:
        # Read again, locked: disabled meanwhile (staff, its key) it stays as they left it.
        current = Endpoint.objects.select_for_update(no_key=True).filter(id=endpoint.id).first()
        if current is None or not current.enabled:
            return
        days = settings.WEBHOOK_DISABLE_AFTER / 86400
        _save(current, {"enabled": False, "disabled_reason": f"{FAILING_PREFIX}{days:g} days."})
        logger.warning("webhook endpoint disabled", extra={"endpoint": endpoint.public_id})


def delivery_signed(delivery: Delivery) -> Signed:
    """What an attempt of the delivery sends (signed with the endpoint's secrets of now)."""
    body = json.dumps(delivery.event.payload, separators=(",", ":")).encode()
    return Signed(
        url=delivery.endpoint.url,
        message_id=delivery.event.event_id,
        body=body,
        secrets=endpoint_secrets(delivery.endpoint),
    )


def endpoint_test(*, endpoint: Endpoint) -> Attempt:
    """A `ping` delivered to the endpoint at once, in the caller's thread; its attempt.
    StaffOnly while staff have it disabled: nothing is sent to it until they enable it."""
    if endpoint_disabled_by(endpoint) == "staff":
        raise StaffOnly(STAFF_ONLY_MESSAGE)
    with transaction.atomic():
        event = outbox_ping(endpoint=endpoint)
        delivery = Delivery.objects.create(
            endpoint=endpoint, event=event, next_attempt_at=timezone.now() + dispatch_lease()
        )
    at = timezone.now()
    result = attempt_send(delivery_signed(delivery))
    delivery_record_attempt(delivery_id=delivery.id, at=at, result=result)
    return Attempt.objects.select_related("delivery__event").filter(delivery=delivery).latest("id")


def delivery_retry(*, delivery: Delivery) -> Delivery:
    """Send the delivery again at once, on a schedule of its own (the first attempt of a new
    series)."""
    delivery.status = Delivery.Status.PENDING
    delivery.next_attempt_at = timezone.now()
    delivery.first_attempt_at = None
    delivery.attempt_count = 0
    delivery.save()
    return delivery
