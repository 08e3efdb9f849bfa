"""Writes of the webhooks: endpoints (create, update, delete, rotate the secret), the fan-out
of the outbox to the matching endpoints, and what an attempt makes of its delivery (the retry
schedule, the final failure, the endpoint disabled after failing for days)."""

from __future__ import annotations

import json
import logging
import secrets
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Count, Q
from django.utils import timezone
from rest_framework_api_key.models import APIKey

from core import outbound
from core.api.params import parse_addresses
from core.db import pg_array
from core.errors import InvalidInput, NotFound, ServiceError
from core.locks import lock_key
from lats.models import Lat
from webhooks.models import Attempt, Delivery, Endpoint, OutboxEvent
from webhooks.outbox import TYPES, Filters, outbox_ping
from webhooks.selectors import endpoint_disabled_by
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
            if enabled and endpoint_disabled_by(current) == Endpoint.DisabledBy.STAFF:
                raise StaffOnly(STAFF_ONLY_MESSAGE)
            values |= _disabled(None if enabled else Endpoint.DisabledBy.KEY, PAUSED_REASON)
            if enabled:
                values["failing_since"] = None
        _save(current, values)
    return current


_DELIVERY = Delivery._meta.db_table
_ATTEMPT = Attempt._meta.db_table
_OUTBOX = OutboxEvent._meta.db_table
_ENDPOINT = Endpoint._meta.db_table
_LAT = Lat._meta.db_table


@transaction.atomic
def endpoint_delete(*, endpoint: Endpoint) -> None:
    """The endpoint with its deliveries, their attempts and its pings, deleted by the database
    in a few statements, never read into the request (an endpoint has up to
    DELIVERY_RETENTION_DAYS of deliveries).

    Locks are taken in the order an attempt's recording takes them
    (webhooks.services.deliveries_record_attempts): the endpoint, then its deliveries, so
    neither waits for the other for ever. Once the endpoint is locked no fan-out can add a
    delivery of it (a fan-out naming it waits, fails at its commit and is done again without
    it), and a fan-out that named it before has committed. An attempt recorded meanwhile
    either commits before (its attempt goes with its delivery) or finds its delivery gone
    and is let go. The deliveries' history rows are left to the retention job
    (webhooks/retention.py); the endpoint's own history records the deletion."""
    params = [endpoint.id]
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
    if current.enabled or endpoint_disabled_by(current) != Endpoint.DisabledBy.STAFF:
        _save(current, _disabled(Endpoint.DisabledBy.STAFF, reason))
    return current


@transaction.atomic
def endpoint_staff_enable(*, endpoint: Endpoint) -> Endpoint:
    """Enabled by staff (admin), whoever disabled it; its failure count starts afresh."""
    current = _locked(endpoint)
    if not current.enabled:
        _save(current, {**_disabled(None), "failing_since": None})
    return current


def _disabled(by: Endpoint.DisabledBy | None, reason: str = "") -> dict[str, Any]:
    """The fields of an endpoint disabled by `by`, and why (None: nobody, it is enabled)."""
    return {"enabled": by is None, "disabled_by": by or "", "disabled_reason": reason if by else ""}


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


# What outbox_fan_out does, in one statement on PostgreSQL: the filters (webhooks.outbox.
# Filters.matches) on jsonb, each delivery inserted in the event's order. Its estimated cost
# (a subplan per event and endpoint) is far above what it does (milliseconds): JIT is off for
# it, or compiling it would take a second of every round.
_FAN_OUT = f"""WITH events AS (
    SELECT o.id, o.type, ARRAY(SELECT jsonb_array_elements_text(o.wallets)) AS wallets,
        o.removes_id, l.proxy_address AS lat
    FROM {_OUTBOX} o LEFT JOIN {_LAT} l ON l.id = o.lat_id
    WHERE o.fanned_out_at IS NULL ORDER BY o.id LIMIT %(limit)s FOR UPDATE OF o SKIP LOCKED
), deliveries AS (
    INSERT INTO {_DELIVERY} (endpoint_id, event_id, status, attempt_count, next_attempt_at,
        created_at, updated_at)
    SELECT e.id, v.id, 'pending', 0, %(now)s, %(now)s, %(now)s
    FROM events v JOIN {_ENDPOINT} e ON e.enabled AND CASE WHEN v.type = 'eventRemoved'
        THEN EXISTS (SELECT FROM {_DELIVERY} s WHERE s.event_id = v.removes_id
            AND s.endpoint_id = e.id AND (s.status = 'pending'
                OR EXISTS (SELECT FROM {_ATTEMPT} a WHERE a.delivery_id = s.id)))
        ELSE (e.types = '[]'::jsonb OR e.types ? v.type)
            AND (e.lats = '[]'::jsonb OR e.lats ? v.lat)
            AND (e.wallets = '[]'::jsonb OR e.wallets ?| v.wallets)
        END
    ORDER BY v.id, e.id
    ON CONFLICT DO NOTHING
)
UPDATE {_OUTBOX} o SET fanned_out_at = %(now)s FROM events v WHERE o.id = v.id"""


def outbox_fan_out(*, limit: int = 500) -> int:
    """One delivery per matching enabled endpoint for the oldest events not fanned out yet
    (rows another dispatcher holds are skipped); returns how many events were fanned out.
    An `eventRemoved` goes to every enabled endpoint that was sent the event it withdraws
    (attempted, or pending still: in flight, the others were cancelled), whatever its `types`
    (or its filters changed since) say: a subscriber to deposits must hear that its deposit is
    gone (extensions.md). On PostgreSQL one statement (_FAN_OUT); elsewhere through the ORM."""
    if connection.vendor == "postgresql":
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("SET LOCAL jit = off")
            cursor.execute(_FAN_OUT, {"limit": limit, "now": timezone.now()})
            return cursor.rowcount
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


@dataclass(frozen=True)
class Finished:
    """One attempt to record: its delivery, when it started, what came of it."""

    delivery_id: int
    at: datetime
    result: AttemptResult


def delivery_record_attempt(*, delivery_id: int, at: datetime, result: AttemptResult) -> Delivery:
    """One attempt recorded (deliveries_record_attempts); Delivery.DoesNotExist when its
    endpoint was deleted meanwhile."""
    deliveries_record_attempts(finished=[Finished(delivery_id, at, result)])
    return Delivery.objects.select_related("endpoint", "event").get(id=delivery_id)


@transaction.atomic
def deliveries_record_attempts(*, finished: list[Finished]) -> dict[int, str]:
    """The attempts stored, in one transaction, and what each makes of its delivery: delivered
    (2xx), tried again on the schedule (a network error, a timeout, a 5xx, a 408, a 429 not
    before its Retry-After), or failed (anything else, or the schedule's end). An endpoint
    whose attempts have all failed for WEBHOOK_DISABLE_AFTER seconds is disabled. Returns each
    recorded delivery's status; a delivery deleted meanwhile (with its endpoint) is left out.

    Lock order, as endpoint_delete takes them: the endpoints (in id order), then their
    deliveries (in id order). Each attempt writes its attempt row and one row update of its
    delivery (no history row: the attempt is the record); each endpoint is written at most
    once per batch, and only when its failing state changes."""
    if not finished:
        return {}
    endpoints, rows = _record_locks(sorted({f.delivery_id for f in finished}))
    now = timezone.now()
    attempts: list[Attempt] = []
    states: dict[int, dict[str, Any]] = {}
    failing: dict[int, datetime | None] = {i: e.failing_since for i, e in endpoints.items()}
    logged = logger.isEnabledFor(logging.INFO)
    for item in sorted(finished, key=lambda f: f.at):
        row = rows.get(item.delivery_id)
        if row is None or row[1] not in endpoints:
            continue  # deleted with its endpoint during the attempt
        result = item.result
        _, endpoint_id, status, count, first, removed, event_id = row
        state = states.setdefault(
            item.delivery_id,
            {"status": status, "count": count, "first": first, "next": None, "code": None},
        )
        attempts.append(
            Attempt(
                delivery_id=item.delivery_id,
                at=item.at,
                status_code=result.status_code,
                error=result.error[:300],
                duration_ms=result.duration_ms,
                response_head=result.response_head,
            )
        )
        state["count"] += 1
        state["first"] = state["first"] or item.at
        state["code"] = result.status_code
        if state["status"] != Delivery.Status.PENDING:  # cancelled meanwhile (a reorg)
            continue
        if removed and not result.delivered:  # orphaned during its first attempt
            state["status"] = Delivery.Status.CANCELLED
            continue
        if result.delivered:
            state["status"] = Delivery.Status.DELIVERED
            failing[endpoint_id] = None
        else:
            delay = retry_delay(state["count"]) if result.retryable else None
            if delay is None:
                state["status"] = Delivery.Status.FAILED
            else:
                due = state["first"] + timedelta(seconds=delay)
                if result.retry_after is not None:
                    due = max(due, now + timedelta(seconds=min(result.retry_after, 86400)))
                state["next"] = due
            failing[endpoint_id] = failing[endpoint_id] or item.at
        if not logged:
            continue
        logger.info(
            "webhook attempt",
            extra={
                "event_id": event_id,
                "delivery_id": item.delivery_id,
                "endpoint": endpoints[endpoint_id].public_id,
                "status_code": result.status_code,
                "error": result.error,
                "duration_ms": result.duration_ms,
                "outcome": state["status"],
            },
        )
    _deliveries_update(attempts, states, now=now)
    for endpoint_id in sorted(endpoints):  # once per endpoint, in id order
        _endpoint_failing(endpoints[endpoint_id], since=failing[endpoint_id], now=now)
    return {i: str(state["status"]) for i, state in states.items()}


@dataclass
class _Locked:
    """An endpoint locked for recording: what the record reads of it."""

    id: int
    public_id: str
    enabled: bool
    failing_since: datetime | None


_LOCK_ENDPOINTS = f"""SELECT e.id, e.public_id, e.enabled, e.failing_since FROM {_ENDPOINT} e
WHERE e.id IN (SELECT d.endpoint_id FROM {_DELIVERY} d WHERE d.id = ANY(%s::bigint[]))
ORDER BY e.id FOR NO KEY UPDATE OF e"""
_LOCK_DELIVERIES = f"""SELECT d.id, d.endpoint_id, d.status, d.attempt_count, d.first_attempt_at,
    o.removed, o.event_id
FROM {_DELIVERY} d JOIN {_OUTBOX} o ON o.id = d.event_id
WHERE d.id = ANY(%s::bigint[]) ORDER BY d.id FOR UPDATE OF d"""


def _record_locks(delivery_ids: list[int]) -> tuple[dict[int, _Locked], dict[int, tuple]]:
    """The endpoints of the deliveries locked first (read through the deliveries), in id
    order; then the deliveries, in id order, with what the record reads of them and their
    event. On PostgreSQL in two plain statements (the ids as one array literal)."""
    if connection.vendor == "postgresql":
        ids = pg_array(delivery_ids)
        with connection.cursor() as cursor:
            cursor.execute(_LOCK_ENDPOINTS, [ids])
            endpoints = {row[0]: _Locked(*row) for row in cursor.fetchall()}
            cursor.execute(_LOCK_DELIVERIES, [ids])
            return endpoints, {row[0]: row for row in cursor.fetchall()}
    endpoints = {
        row[0]: _Locked(*row)
        for row in Endpoint.objects.filter(
            id__in=Delivery.objects.filter(id__in=delivery_ids).values("endpoint_id")
        )
        .order_by("id")
        .select_for_update(no_key=True)
        .values_list("id", "public_id", "enabled", "failing_since")
    }
    rows = {
        row[0]: row
        for row in Delivery.objects.filter(id__in=delivery_ids)
        .order_by("id")
        .select_for_update(of=("self",))
        .values_list(
            "id",
            "endpoint_id",
            "status",
            "attempt_count",
            "first_attempt_at",
            "event__removed",
            "event__event_id",
        )
    }
    return endpoints, rows


# The attempts and the deliveries' new states as two JSON documents (one parameter each:
# binding thirteen arrays element by element cost more than the statement).
_UPDATE = f"""WITH attempts AS (INSERT INTO {_ATTEMPT}
    (delivery_id, at, status_code, error, duration_ms, response_head)
    SELECT * FROM jsonb_to_recordset(%s::jsonb) AS a(delivery_id bigint, at timestamptz,
        status_code int, error text, duration_ms int, response_head text))
UPDATE {_DELIVERY} AS d SET status = v.status, attempt_count = v.attempts,
    first_attempt_at = v.first_at, last_status_code = v.code, next_attempt_at = v.next_at,
    leased_until = NULL, updated_at = %s
FROM jsonb_to_recordset(%s::jsonb) AS v(id bigint, status text, attempts int,
    first_at timestamptz, code int, next_at timestamptz)
WHERE d.id = v.id"""


def _iso(at: datetime | None) -> str | None:
    return None if at is None else at.isoformat()


def _deliveries_update(
    attempts: list[Attempt], states: dict[int, dict[str, Any]], *, now: datetime
) -> None:
    """The attempts stored and each delivery's state after its attempt, its lease ended: one
    statement on PostgreSQL (elsewhere bulk_create and bulk_update)."""
    if not states:
        return
    for state in states.values():
        if state["status"] != Delivery.Status.PENDING:
            state["next"] = None
    if connection.vendor == "postgresql":
        added = json.dumps(
            [
                {
                    "delivery_id": a.delivery_id,
                    "at": _iso(a.at),
                    "status_code": a.status_code,
                    "error": a.error,
                    "duration_ms": a.duration_ms,
                    "response_head": a.response_head,
                }
                for a in attempts
            ]
        )
        changed = json.dumps(
            [
                {
                    "id": delivery_id,
                    "status": str(v["status"]),
                    "attempts": v["count"],
                    "first_at": _iso(v["first"]),
                    "code": v["code"],
                    "next_at": _iso(v["next"]),
                }
                for delivery_id, v in states.items()
            ]
        )
        with connection.cursor() as cursor:
            cursor.execute(_UPDATE, [added, now, changed])
        return
    Attempt.objects.bulk_create(attempts, batch_size=1000)
    Delivery.objects.bulk_update(
        [
            Delivery(
                id=delivery_id,
                status=state["status"],
                attempt_count=state["count"],
                first_attempt_at=state["first"],
                last_status_code=state["code"],
                next_attempt_at=state["next"],
                leased_until=None,
                updated_at=now,
            )
            for delivery_id, state in states.items()
        ],
        [
            "status",
            "attempt_count",
            "first_attempt_at",
            "last_status_code",
            "next_attempt_at",
            "leased_until",
            "updated_at",
        ],
    )


def _endpoint_failing(endpoint: _Locked, *, since: datetime | None, now: datetime) -> None:
    """The endpoint's failing state after the batch (locked already): failing since `since`
    (None: its last attempt succeeded), disabled once that is WEBHOOK_DISABLE_AFTER ago. A
    disabled endpoint (staff, its key) stays as they left it."""
    if since != endpoint.failing_since:
        Endpoint.objects.filter(id=endpoint.id).update(failing_since=since)
        endpoint.failing_since = since
    if since is None or not endpoint.enabled:
        return
    if (now - since).total_seconds() >= settings.WEBHOOK_DISABLE_AFTER:
        days = settings.WEBHOOK_DISABLE_AFTER / 86400
        reason = f"{FAILING_PREFIX}{days:g} days."
        _save(Endpoint.objects.get(id=endpoint.id), _disabled(Endpoint.DisabledBy.SERVICE, reason))
        logger.warning("webhook endpoint disabled", extra={"endpoint": endpoint.public_id})


# --- the claim -----------------------------------------------------------------------------------

CLAIM_LOCK = "webhooks.claim"  # core.locks.lock_key: one claim at a time across dispatchers

_CANDIDATES = f"""SELECT e.id, e.api_key_id, e.failing_since IS NOT NULL, l.n, d.id
FROM {_ENDPOINT} e
CROSS JOIN LATERAL (SELECT count(*) AS n FROM {_DELIVERY} l
    WHERE l.endpoint_id = e.id AND l.leased_until > %(now)s) l
CROSS JOIN LATERAL (SELECT id, next_attempt_at FROM {_DELIVERY} d
    WHERE d.endpoint_id = e.id AND d.status = 'pending' AND d.next_attempt_at <= %(now)s
    ORDER BY d.next_attempt_at, d.id LIMIT greatest(%(per)s - l.n, 0)) d
WHERE e.enabled
ORDER BY d.next_attempt_at, d.id"""


@dataclass(frozen=True)
class Claimed:
    """A delivery claimed for an attempt: what it sends, and what the claim's fairness counted
    it as."""

    delivery_id: int
    endpoint_id: int
    key_id: str
    failing: bool
    signed: Signed


@dataclass(frozen=True)
class Candidate:
    delivery_id: int
    endpoint_id: int
    key_id: str
    failing: bool
    leased: int  # the endpoint's deliveries leased now, by every dispatcher


def claim_fair(
    candidates: list[Candidate],
    *,
    free: int,
    failing_free: int,
    key_load: dict[str, int],
    restricted_load: dict[str, int] | None = None,
) -> list[Candidate]:
    """At most `free` of the candidates (each endpoint's oldest due ones, oldest first), shared
    fairly: across API keys first (the key with the fewest sends in flight, `key_load`, and
    claimed so far takes the next turn), then across the key's endpoints (the endpoint with the
    fewest leased and claimed so far, one delivery per endpoint per turn, oldest first).

    Failing candidates (`Candidate.failing`: failing or not yet heard from) get at most
    `failing_free` senders together. Within that share a key's turn goes to its least loaded
    endpoint, failing or not (on a tie, one that answers): a new endpoint of a key whose other
    endpoints have a backlog gets its first attempts at once, not after that backlog. A key
    with only failing ones left gives its turn to a failing candidate of the key with the
    fewest failing sends in flight (`restricted_load`), so that one key's dead endpoints
    cannot keep another key's new endpoints from their first attempt."""
    queues: dict[bool, dict[str, dict[int, list[Candidate]]]] = {False: {}, True: {}}
    for candidate in candidates:  # oldest first: each endpoint's queue too
        by_key = queues[candidate.failing].setdefault(candidate.key_id, {})
        by_key.setdefault(candidate.endpoint_id, []).append(candidate)
    first_seen: dict[str, int] = {}
    for candidate in candidates:
        first_seen.setdefault(candidate.key_id, len(first_seen))  # the oldest due first on a tie
    load = {key: key_load.get(key, 0) for key in first_seen}
    restricted = {key: (restricted_load or {}).get(key, 0) for key in first_seen}
    endpoint_load = {c.endpoint_id: c.leased for c in candidates}

    def pop(failing: bool, key: str) -> Candidate:
        endpoints = queues[failing][key]
        endpoint = min(endpoints, key=lambda e: (endpoint_load[e], endpoints[e][0].delivery_id))
        candidate = endpoints[endpoint].pop(0)
        if not endpoints[endpoint]:
            del endpoints[endpoint]
        if not endpoints:
            del queues[failing][key]
        return candidate

    def least(failing: bool, key: str) -> int:
        return min(endpoint_load[e] for e in queues[failing][key])

    taken: list[Candidate] = []
    while len(taken) < free:
        if failing_free <= 0:
            queues[True].clear()  # the failing endpoints hold their share already
        keys = queues[False].keys() | queues[True].keys()
        if not keys:
            break
        key = min(keys, key=lambda k: (load[k], first_seen[k]))
        if key not in queues[False]:  # only failing ones: the turn goes where fewest are
            key = min(queues[True], key=lambda k: (restricted[k], first_seen[k]))
            failing = True
        else:  # the key's least loaded endpoint, failing or not (within the failing share)
            failing = key in queues[True] and least(True, key) < least(False, key)
        candidate = pop(failing, key)
        if failing:
            restricted[key] += 1
            failing_free -= 1
        taken.append(candidate)
        load[key] += 1
        endpoint_load[candidate.endpoint_id] += 1
    return taken


@transaction.atomic
def deliveries_claim(
    *,
    free: int,
    per_endpoint: int,
    failing_free: int,
    key_load: dict[str, int],
    restricted_load: dict[str, int] | None = None,
    answered: Collection[int] | None = None,
) -> list[Claimed]:
    """Claim up to `free` due deliveries for attempts (claim_fair), each endpoint's leased
    ones, by every dispatcher, kept within `per_endpoint`: each is leased (`leased_until`, and
    `next_attempt_at` moved as far, so that it is sent again if its attempt is never recorded).

    With `answered` (the endpoints that answered 2xx since the dispatcher started and have
    not failed since), an endpoint not among them counts with the failing ones: a new or
    unknown endpoint starts with the failing endpoints' share until it answers, so endpoints
    that were never heard from cannot take every sender before they are known to fail.

    Claims are serialized across dispatchers by a transaction advisory lock (one short
    statement pair each), so that two claims never both count an endpoint's free slots."""
    if free <= 0:
        return []
    now = timezone.now()
    postgresql = connection.vendor == "postgresql"
    if postgresql:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [lock_key(CLAIM_LOCK)])
            cursor.execute(_CANDIDATES, {"now": now, "per": per_endpoint})
            rows = cursor.fetchall()
    else:
        rows = candidate_rows(now=now, per_endpoint=per_endpoint)
    candidates = [
        Candidate(
            delivery_id,
            endpoint_id,
            str(key_id),
            bool(failing) or (answered is not None and endpoint_id not in answered),
            leased,
        )
        for endpoint_id, key_id, failing, leased, delivery_id in rows
    ]
    taken = claim_fair(
        candidates,
        free=free,
        failing_free=failing_free,
        key_load=key_load,
        restricted_load=restricted_load,
    )
    if not taken:
        return []
    lease = now + dispatch_lease()
    ids = [c.delivery_id for c in taken]
    if postgresql:
        with connection.cursor() as cursor:
            cursor.execute(_CLAIM, [lease, lease, pg_array(ids), now])
            leased = {row[0]: row for row in cursor.fetchall()}
    else:
        leased = _claim_rows(ids, lease=lease, now=now)
    claimed = []
    for c in taken:
        if (row := leased.get(c.delivery_id)) is None:
            continue  # changed since it was read (recorded, retried, cancelled)
        _, event_id, payload, url, secret, previous, until = row
        sender = Endpoint(secret=secret, previous_secret=previous, previous_secret_until=until)
        signed = Signed(url, event_id, _body(payload), endpoint_secrets(sender, now=now))
        claimed.append(Claimed(c.delivery_id, c.endpoint_id, c.key_id, c.failing, signed))
    return claimed


def candidate_rows(*, now: datetime, per_endpoint: int) -> list[tuple]:
    """_CANDIDATES' rows read through the ORM, for a database without LATERAL (SQLite, the
    demo's dispatcher): (endpoint, key, failing, leased, delivery), oldest due first. SQLite
    takes one writer at a time, which serializes the claims as the advisory lock does."""
    leased = dict(
        Delivery.objects.filter(leased_until__gt=now)
        .values("endpoint_id")
        .annotate(n=Count("id"))
        .values_list("endpoint_id", "n")
    )
    rows = []
    for endpoint_id, key_id, failing_since in Endpoint.objects.filter(enabled=True).values_list(
        "id", "api_key_id", "failing_since"
    ):
        room = per_endpoint - leased.get(endpoint_id, 0)
        if room <= 0:
            continue
        due = Delivery.objects.filter(
            endpoint_id=endpoint_id, status=Delivery.Status.PENDING, next_attempt_at__lte=now
        ).order_by("next_attempt_at", "id")
        for delivery_id, at in due.values_list("id", "next_attempt_at")[:room]:
            row = (endpoint_id, key_id, failing_since is not None, leased.get(endpoint_id, 0))
            rows.append((at, delivery_id, (*row, delivery_id)))
    return [row for _, _, row in sorted(rows, key=lambda r: (r[0], r[1]))]


def _claim_rows(ids: list[int], *, lease: datetime, now: datetime) -> dict[int, tuple]:
    """_CLAIM through the ORM (see candidate_rows)."""
    with transaction.atomic():
        taken = list(
            Delivery.objects.filter(
                id__in=ids, status=Delivery.Status.PENDING, next_attempt_at__lte=now
            ).values_list("id", flat=True)
        )
        Delivery.objects.filter(id__in=taken).update(next_attempt_at=lease, leased_until=lease)
    return {
        d.id: (
            d.id,
            d.event.event_id,
            d.event.payload,
            d.endpoint.url,
            d.endpoint.secret,
            d.endpoint.previous_secret,
            d.endpoint.previous_secret_until,
        )
        for d in Delivery.objects.filter(id__in=taken).select_related("event", "endpoint")
    }


# Driven by the ids, whatever the statistics say: the ids joined (`d.id = ANY(...)` was ANDed
# with the due index, a scan of every dead entry a burst left in it until vacuum), and the
# still-due check written so that no partial index (status = 'pending') matches it (statistics
# from before a burst, no delivery pending, had the planner walk the due index and join the
# ids to every row it found).
_CLAIM = f"""UPDATE {_DELIVERY} AS d SET next_attempt_at = %s, leased_until = %s
FROM unnest(%s::bigint[]) AS c(id), {_ENDPOINT} e, {_OUTBOX} o
WHERE d.id = c.id AND (d.status = 'pending' AND d.next_attempt_at <= %s) IS TRUE
    AND e.id = d.endpoint_id AND o.id = d.event_id
RETURNING d.id, o.event_id, o.payload::text, e.url, e.secret, e.previous_secret,
    e.previous_secret_until"""


def _body(payload: Any) -> bytes:
    """The payload as sent: compact JSON (from a dict, or PostgreSQL's text of it)."""
    if isinstance(payload, str):
        payload = json.loads(payload)
    return json.dumps(payload, separators=(",", ":")).encode()


def delivery_signed(delivery: Delivery) -> Signed:
    """What an attempt of the delivery sends (signed with the endpoint's secrets of now)."""
    return Signed(
        url=delivery.endpoint.url,
        message_id=delivery.event.event_id,
        body=_body(delivery.event.payload),
        secrets=endpoint_secrets(delivery.endpoint),
    )


def endpoint_test(*, endpoint: Endpoint) -> Attempt:
    """A `ping` delivered to the endpoint at once, in the caller's thread; its attempt.
    StaffOnly while staff have it disabled: nothing is sent to it until they enable it."""
    if endpoint_disabled_by(endpoint) == Endpoint.DisabledBy.STAFF:
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
