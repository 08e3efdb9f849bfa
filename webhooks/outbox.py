"""The outbox: what must be pushed, written in the transaction that stored it (extensions.md:
"no crash, restart or Redis outage between indexing and sending loses one"). One row per
event, not per endpoint; the dispatcher fans each out to the matching endpoints.

- Chain events: from the indexing transaction (activity/indexer.py calls INDEX_LISTENER), once
  the LAT's first indexing has succeeded: the history of a LAT just imported is pushed to no one.
- `eventRemoved`: from the same transaction when a reorg removes an event of the outbox (a
  stream may have sent it); the dispatcher sends it to every endpoint that was sent the event,
  whatever its filters say now, and cancels the event's deliveries not attempted yet; a stream
  gets it where its filters select the event it withdraws (`Filters.matches`).
- `statusChanged`: from the state refresh's transaction (sync/refresh.py).
- `ping`: from `POST /webhooks/{id}/test`, for that endpoint only.

The outbox is also the live stream's feed (stream/): its ids are the stream's cursors. So that a
reader that has seen id N has seen every row below N, rows are written under one transaction
lock (`_commit_in_order`): ids are taken and committed in one order. Rows written while no
endpoint is enabled are stored as fanned out already (an endpoint hears of what is stored after
it exists; the dispatcher has nothing to do for them).
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from django.db import connection
from django.utils import timezone

from activity.selectors import FEED_TYPES, event_document
from chain.activity import ActivityLog
from deposits.models import Event
from deposits.selectors import iso_instant
from lats.models import Lat
from webhooks.models import Delivery, Endpoint, OutboxEvent

# The types an endpoint may subscribe to (extensions.md).
TYPES: tuple[str, ...] = (
    *FEED_TYPES,
    OutboxEvent.Type.STATUS_CHANGED.value,
    OutboxEvent.Type.EVENT_REMOVED.value,
)
# The args that name a wallet (the `wallets` filter).
WALLET_ARGS = ("sender", "receiver", "from", "to", "depositor", "initiator")


@dataclass(frozen=True)
class Filters:
    """What a subscriber (a webhook endpoint, a live stream) selects of the outbox: `lats`
    (checksummed), `types` and `wallets` (lower-case); empty: any."""

    lats: frozenset[str] = frozenset()
    types: frozenset[str] = frozenset()
    wallets: frozenset[str] = frozenset()

    def matches(
        self, kind: str, lat: str | None, wallets: Iterable[str], removed: str | None = None
    ) -> bool:
        """Whether an event of type `kind`, of the LAT `lat`, naming `wallets` is selected. An
        `eventRemoved` (`removed`: the type of the event it withdraws, whose LAT and wallets it
        carries) is selected wherever that event was, whatever `types` say (extensions.md: a
        subscriber to deposits hears that its deposit is gone), and where `types` name it."""
        if self.types and kind not in self.types and removed not in self.types:
            return False
        if self.lats and lat not in self.lats:
            return False
        return not (self.wallets and self.wallets.isdisjoint(wallets))


NOTIFY_CHANNEL = "lat_webhooks"


def event_id(chain_id: int, block_hash: str, tx_hash: str, log_index: int) -> str:
    """The payload's `id` of a chain event: the same for every attempt and every endpoint, and
    naming one log of one block (extensions.md): `evt_` + the first 32 hex digits of SHA-256
    over `{chainId}:{blockHash}:{transactionHash}:{logIndex}` (hashes in lower-case 0x-hex). A
    transaction mined again in another block after a reorg is a new event with a new id, even
    at the same height and log index. Rows stored before this form keep the id they were
    pushed with (`evt_{chainId}_{transactionHash}_{logIndex}`)."""
    text = f"{chain_id}:{block_hash.lower()}:{tx_hash.lower()}:{log_index}"
    return "evt_" + hashlib.sha256(text.encode()).hexdigest()[:32]


def payload(message_id: str, kind: str, data: dict[str, Any]) -> dict[str, Any]:
    return {"id": message_id, "type": kind, "createdAt": iso_instant(timezone.now()), "data": data}


# pg_advisory_xact_lock's key: "LATO" (outbox) in ASCII.
_ORDER_LOCK = 0x4C41544F


def _durable() -> None:
    """This transaction commits durably (`synchronous_commit` on until it ends), whatever the
    indexing transaction or the server's configuration set: what it writes to the outbox is
    sent at its commit (the NOTIFY), and a receiver must never hold an event (or a stream a
    cursor) that a PostgreSQL crash could take back (extensions.md: "nothing is sent before that
    transaction is durable")."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL synchronous_commit = on")


def _commit_in_order() -> None:
    """Hold the outbox's writing lock until this transaction ends: every writer takes its ids
    and commits while holding it, so ids become visible in ascending order (a stream reading
    "after N" never skips a row a slower transaction commits later). SQLite has one writer.
    Every writer commits durably (`_durable`)."""
    _durable()
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_ORDER_LOCK])


def _fanned_out_at():
    """None while some endpoint is enabled (the dispatcher fans the row out), else now."""
    return None if Endpoint.objects.filter(enabled=True).exists() else timezone.now()


def _notify() -> None:
    """Wake the dispatcher when the transaction commits (PostgreSQL sends NOTIFY then)."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(f"NOTIFY {NOTIFY_CHANNEL}")


def _wallets(args: Any) -> list[str]:
    if not isinstance(args, dict):
        return []
    named = {args.get(name) for name in WALLET_ARGS}
    return sorted(a.lower() for a in named if isinstance(a, str) and a.startswith("0x"))


def outbox_events_stored(*, lat: Lat, logs: Sequence[ActivityLog]) -> int:
    """One outbox row per new feed event of the LAT; returns how many."""
    keys = {(log.block_number, log.log_index) for log in logs if log.type in FEED_TYPES}
    if not keys:
        return 0
    fanned_out_at = _fanned_out_at()
    blocks = [block for block, _ in keys]
    rows = Event.objects.filter(
        lat=lat, block_number__gte=min(blocks), block_number__lte=max(blocks), type__in=FEED_TYPES
    ).values_list(
        "type", "block_number", "created_at", "tx_hash", "log_index", "args", "block_hash"
    )
    out = []
    for *row, block_hash in rows:
        kind, block, _, tx_hash, log_index, args = row
        if (block, log_index) not in keys:
            continue
        message_id = event_id(lat.chain_id, block_hash, tx_hash, log_index)
        data = {**event_document(*row), "lat": lat.proxy_address, "chainId": lat.chain_id}
        out.append(
            OutboxEvent(
                event_id=message_id,
                type=kind,
                lat=lat,
                block_number=block,
                log_index=log_index,
                wallets=_wallets(args),
                payload=payload(message_id, kind, data),
                fanned_out_at=fanned_out_at,
            )
        )
    out.sort(key=lambda event: (event.block_number, event.log_index))
    _commit_in_order()
    OutboxEvent.objects.bulk_create(out, batch_size=1000, ignore_conflicts=True)
    _notify()
    return len(out)


def outbox_events_removing(*, lat: Lat, from_block: int) -> int:
    """A reorg removes the LAT's events at or after `from_block`: each is withdrawn with an
    `eventRemoved` (a stream may have sent it; the dispatcher sends it only to the endpoints
    that were sent the event), and its deliveries not attempted yet are cancelled (one in flight
    is, when its attempt is recorded). Returns how many eventRemoved were written."""
    doomed = list(
        OutboxEvent.objects.filter(
            lat=lat, block_number__gte=from_block, removed=False, type__in=FEED_TYPES
        )
        .select_for_update()
        .order_by("id")
    )
    if not doomed:
        return 0
    now = timezone.now()
    ids = [event.id for event in doomed]
    pending = Delivery.objects.filter(event_id__in=ids, status=Delivery.Status.PENDING)
    # Never attempted yet due later than now: claimed by a dispatcher, its first attempt under way.
    in_flight = pending.filter(attempts__isnull=True, next_attempt_at__gt=now)
    pending.exclude(id__in=in_flight.values("id")).update(
        status=Delivery.Status.CANCELLED, next_attempt_at=None
    )
    OutboxEvent.objects.filter(id__in=ids).update(removed=True)
    OutboxEvent.objects.filter(id__in=ids, fanned_out_at__isnull=True).update(fanned_out_at=now)
    fanned_out_at = _fanned_out_at()
    removals = [_removal(lat, event, fanned_out_at) for event in doomed]
    _commit_in_order()
    OutboxEvent.objects.bulk_create(removals)
    _notify()
    return len(removals)


def _removal(lat: Lat, event: OutboxEvent, fanned_out_at) -> OutboxEvent:
    message_id = f"evt_removed_{event.id}"
    data = {
        "lat": lat.proxy_address,
        "chainId": lat.chain_id,
        "removedId": event.event_id,
        "removedType": event.type,
        "blockNumber": event.block_number,
        "logIndex": event.log_index,
        "transactionHash": event.payload["data"].get("transactionHash"),
    }
    return OutboxEvent(
        event_id=message_id,
        type=OutboxEvent.Type.EVENT_REMOVED,
        lat=lat,
        block_number=event.block_number,
        log_index=event.log_index,
        removes=event,
        wallets=event.wallets,
        payload=payload(message_id, OutboxEvent.Type.EVENT_REMOVED, data),
        fanned_out_at=fanned_out_at,
    )


def outbox_status_changed(
    *, lat: Lat, paused: bool, prices_stale: bool | None, state_block: int
) -> OutboxEvent:
    """A `statusChanged` of the LAT (its `paused` or `pricesStale` changed at `state_block`)."""
    message_id = f"evt_status_{lat.chain_id}_{lat.proxy_address.lower()}_{state_block}"
    data = {
        "lat": lat.proxy_address,
        "chainId": lat.chain_id,
        "paused": paused,
        "pricesStale": prices_stale,
        "stateBlock": state_block,
    }
    _commit_in_order()
    event, _ = OutboxEvent.objects.get_or_create(
        event_id=message_id,
        removed=False,
        defaults={
            "type": OutboxEvent.Type.STATUS_CHANGED,
            "lat": lat,
            "block_number": state_block,
            "payload": payload(message_id, OutboxEvent.Type.STATUS_CHANGED, data),
            "fanned_out_at": _fanned_out_at(),
        },
    )
    _notify()
    return event


def outbox_ping(*, endpoint: Endpoint) -> OutboxEvent:
    """A `ping` for one endpoint (POST /webhooks/{id}/test), never fanned out."""
    message_id = f"evt_ping_{secrets.token_hex(12)}"
    data = {"endpoint": endpoint.public_id}
    _durable()
    return OutboxEvent.objects.create(
        event_id=message_id,
        type=OutboxEvent.Type.PING,
        endpoint=endpoint,
        payload=payload(message_id, OutboxEvent.Type.PING, data),
        fanned_out_at=timezone.now(),
    )


class _IndexListener:
    def stored(self, lat: Lat, logs: Sequence[ActivityLog]) -> None:
        outbox_events_stored(lat=lat, logs=logs)

    def removing(self, lat: Lat, from_block: int) -> None:
        outbox_events_removing(lat=lat, from_block=from_block)


INDEX_LISTENER = _IndexListener()
