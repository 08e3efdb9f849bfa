"""What the stream's connect request (stream/api/views.py, a Django view: the API key, the rate
limit, the filters, the per-address cap, CORS, the error body) hands the stream process
(stream/asgi.py), which keeps the connection open: a grant, named by a response header that
never leaves the process.

A grant is taken within moments of its issue, unless the client went away while its connect was
being granted: Django then drops the view's answer, and the grant (with the slot it holds) is
never taken. So a grant lapses STREAM_GRANT_SECONDS after its issue: the lapsed ones are
dropped, and their slots released, by every connect before it takes a slot and at every take;
their slots are not renewed in Redis meanwhile (stream/slots.py), so they lapse there too
without a connect."""

from __future__ import annotations

import logging
import secrets
import threading
import time
from dataclasses import dataclass

from django.conf import settings

from stream.slots import Slot, slot_hold, slot_release
from webhooks.outbox import Filters

logger = logging.getLogger(__name__)

GRANT_HEADER = "X-Lat-Stream-Grant"
# Set by stream/asgi.py on the requests it serves: only there may a stream be granted.
SCOPE_KEY = "lat.stream"
UNAVAILABLE = "unavailable"  # its value when the feed cannot be read (the connect is a 500)


@dataclass(frozen=True)
class Grant:
    filters: Filters
    cursor: int | None  # resume after this id; None: live from now
    slot: Slot
    key: str | None = None  # the id of the API key the connect was made with (stream/hub.py)


_grants: dict[str, tuple[Grant, float]] = {}  # token -> the grant, when it lapses (monotonic)
_lock = threading.Lock()


def grant_issue(grant: Grant) -> str:
    token = secrets.token_hex(16)
    with _lock:
        _grants[token] = (grant, time.monotonic() + settings.STREAM_GRANT_SECONDS)
    return token


def grant_take(token: str) -> Grant | None:
    """The grant, its slot now held by the stream; None for an unknown or lapsed token."""
    grants_expire()
    with _lock:
        issued = _grants.pop(token, None)
    if issued is None:
        return None
    slot_hold(issued[0].slot)
    return issued[0]


def grants_expire() -> int:
    """Drop the grants never taken within STREAM_GRANT_SECONDS and release their slots; how
    many."""
    now = time.monotonic()
    with _lock:
        lapsed = [token for token, (_, until) in _grants.items() if until <= now]
        grants = [_grants.pop(token)[0] for token in lapsed]
    for grant in grants:
        logger.info("stream: a stream connect ended before its stream started; slot released")
        slot_release(grant.slot)
    return len(grants)
