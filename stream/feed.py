"""The live stream's feed: the webhooks' outbox (webhooks.models.OutboxEvent), every event the
indexer stored, every statusChanged and eventRemoved, in the order the outbox's ids give (they
become visible in ascending order: webhooks/outbox.py). A row's id is the stream's cursor; its
payload, the webhook payload, is the message's data."""

from __future__ import annotations

import json
from dataclasses import dataclass

from django.db.models import Q

from webhooks.models import OutboxEvent
from webhooks.outbox import Filters

REMOVED = OutboxEvent.Type.EVENT_REMOVED.value


@dataclass(frozen=True, slots=True)
class Message:
    id: int
    type: str
    lat: str | None  # checksummed
    wallets: frozenset[str]  # lower-case
    removed: str | None  # an eventRemoved: the type of the event it withdraws
    frame: bytes  # the Server-Sent Events message, encoded once for every stream


def selected(filters: Filters, message: Message) -> bool:
    return filters.matches(message.type, message.lat, message.wallets, message.removed)


def sse_frame(message_id: int, kind: str, payload: dict) -> bytes:
    data = json.dumps(payload, separators=(",", ":"), ensure_ascii=False)
    return f"id: {message_id}\nevent: {kind}\ndata: {data}\n\n".encode()


def _feed():
    # Pings (one endpoint's, written outside the outbox's lock) are not the feed's.
    return OutboxEvent.objects.filter(endpoint__isnull=True).exclude(type=OutboxEvent.Type.PING)


def feed_high() -> int:
    """The id of the newest row (0: none), where a stream without a cursor starts."""
    row = _feed().order_by("-id").values_list("id", flat=True).first()
    return row or 0


def feed_after(
    after: int, *, upto: int | None = None, filters: Filters | None = None, limit: int = 1000
) -> tuple[list[Message], int, bool]:
    """The messages after id `after` (up to `upto`), oldest first, at most `limit` rows read:
    (those matching `filters`, the last id read, whether more rows may follow)."""
    rows = _feed().filter(id__gt=after)
    if upto is not None:
        rows = rows.filter(id__lte=upto)
    if filters is not None and filters.types:
        # eventRemoved follows the event it withdraws (Filters.matches, below)
        rows = rows.filter(Q(type__in=filters.types) | Q(type=REMOVED))
    if filters is not None and filters.lats:
        rows = rows.filter(lat__proxy_address__in=filters.lats)
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
