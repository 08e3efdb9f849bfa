"""The live stream's feed: the webhooks' outbox (webhooks.models.OutboxEvent), every event the
indexer stored, every statusChanged and eventRemoved, in the order the outbox's ids give (they
become visible in ascending order: webhooks/outbox.py). A row's id is the stream's cursor; its
payload, the webhook payload, is the message's data.

The feed keeps PUSH_RETENTION_DAYS (webhooks/retention.py deletes the oldest ids first and
records how far): a cursor below what is deleted is expired (`FeedExpired`, answered with one
`reset` message), never served with a gap; a cursor above the newest id is no cursor of this
feed (stream/api/views.py refuses it)."""

from __future__ import annotations

import json
from dataclasses import dataclass

from django.conf import settings
from django.db import connection
from django.db.models import Q
from django.utils import timezone

from deposits.selectors import iso_instant
from webhooks.models import OutboxEvent, RetentionMark
from webhooks.outbox import Filters
from webhooks.retention import retention_horizon

REMOVED = OutboxEvent.Type.EVENT_REMOVED.value
RESET = "reset"
# Where a client re-reads what it missed (extensions.md, "Activity").
RELISTING = "/lat/{address}/events"


@dataclass(frozen=True, slots=True)
class Message:
    id: int
    type: str
    lat: str | None  # checksummed
    wallets: frozenset[str]  # lower-case
    removed: str | None  # an eventRemoved: the type of the event it withdraws
    frame: bytes  # the Server-Sent Events message, encoded once for every stream


class FeedExpired(Exception):
    """A cursor below what retention deleted: messages after it are gone."""

    def __init__(self, cursor: int, oldest: int | None) -> None:
        super().__init__(f"the feed is deleted through {cursor}")
        self.cursor = cursor  # every id up to it is deleted: resuming from it misses nothing
        self.oldest = oldest  # the oldest message still kept (None: none is)


def selected(filters: Filters, message: Message) -> bool:
    return filters.matches(message.type, message.lat, message.wallets, message.removed)


def sse_frame(message_id: int, kind: str, payload: dict) -> bytes:
    data = json.dumps(payload, separators=(",", ":"), ensure_ascii=False)
    return f"id: {message_id}\nevent: {kind}\ndata: {data}\n\n".encode()


def reset_frame(expired: FeedExpired) -> bytes:
    """The one message a stream resumed from an expired cursor gets before the server closes
    it. It has no `id:`: the client's cursor stays the expired one, so that reconnecting with
    it is answered the same, never with a gap."""
    days = f"{settings.PUSH_RETENTION_DAYS:g}"
    data = {
        "oldestId": expired.oldest,
        "cursor": expired.cursor,
        "listing": RELISTING,
        "message": (
            f"Messages up to id {expired.cursor} are no longer kept (the feed keeps {days} "
            f"days): re-read what you missed from GET {RELISTING} (and GET /webhooks/{{id}}/"
            "deliveries), then reconnect without a cursor to follow what comes next, or with "
            f"cursor={expired.cursor} to replay every message still kept."
        ),
    }
    payload = {"type": RESET, "createdAt": iso_instant(timezone.now()), "data": data}
    text = json.dumps(payload, separators=(",", ":"), ensure_ascii=False)
    return f"event: {RESET}\ndata: {text}\n\n".encode()


def _feed():
    # Pings (one endpoint's, written outside the outbox's lock) are not the feed's.
    return OutboxEvent.objects.filter(endpoint__isnull=True).exclude(type=OutboxEvent.Type.PING)


def feed_high() -> int:
    """The newest id of the feed (0: none), where a stream without a cursor starts: its newest
    row's, or the last one retention deleted when none is left."""
    row = _feed().order_by("-id").values_list("id", flat=True).first()
    return max(row or 0, retention_horizon(RetentionMark.Table.OUTBOX))


def feed_expired(after: int) -> FeedExpired | None:
    """Whether messages after id `after` were deleted by retention (and which are kept)."""
    horizon = retention_horizon(RetentionMark.Table.OUTBOX)
    if after >= horizon:
        return None
    oldest = _feed().filter(id__gt=horizon).order_by("id").values_list("id", flat=True).first()
    return FeedExpired(horizon, oldest)


def feed_after(
    after: int, *, upto: int | None = None, filters: Filters | None = None, limit: int = 1000
) -> tuple[list[Message], int, bool]:
    """The messages after id `after` (up to `upto`), oldest first, at most `limit` rows read:
    (those matching `filters`, the last id read, whether more rows may follow). The filters
    select in the database (a rare wallet's rows are found by the outbox's index of wallets,
    not by reading every row); `Filters.matches` then decides what SQL cannot say alone."""
    rows = _feed().filter(id__gt=after)
    if upto is not None:
        rows = rows.filter(id__lte=upto)
    if filters is not None and filters.types:
        # eventRemoved follows the event it withdraws (Filters.matches, below)
        rows = rows.filter(Q(type__in=filters.types) | Q(type=REMOVED))
    if filters is not None and filters.lats:
        rows = rows.filter(lat__proxy_address__in=filters.lats)
    if filters is not None and filters.wallets and connection.vendor == "postgresql":
        # jsonb ?| (array elements; SQLite's JSON has no such test: the demo reads them all)
        rows = rows.filter(wallets__has_any_keys=sorted(filters.wallets))
    read = list(
        rows.order_by("id").values_list("id", "type", "lat__proxy_address", "wallets", "payload")[
            :limit
        ]
    )
    messages = []
    for row_id, kind, lat, wallets, payload in read:
        removed = payload["data"].get("removedType") if kind == REMOVED else None
        if filters is None or filters.matches(kind, lat, wallets or (), removed):
            frame = sse_frame(row_id, kind, payload)
            messages.append(Message(row_id, kind, lat, frozenset(wallets or ()), removed, frame))
    return messages, read[-1][0] if read else after, len(read) == limit


def feed_backlog(
    after: int, *, upto: int, filters: Filters, limit: int
) -> tuple[list[Message], int, bool]:
    """`feed_after` for a stream catching up from its cursor; FeedExpired when retention
    deleted messages after `after`. Read after the page: a deletion that committed before the
    page was read shows (the page may miss its rows); one after it cannot have taken them."""
    page = feed_after(after, upto=upto, filters=filters, limit=limit)
    if expired := feed_expired(after):
        raise expired
    return page
