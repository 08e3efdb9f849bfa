"""What the stream's connect request (stream/api/views.py, a Django view: the API key, the rate
limit, the filters, the per-address cap, CORS, the error body) hands the stream process
(stream/asgi.py), which keeps the connection open: a grant, named by a response header that
never leaves the process."""

from __future__ import annotations

import secrets
import threading
from dataclasses import dataclass

from stream.slots import Slot
from webhooks.outbox import Filters

GRANT_HEADER = "X-Lat-Stream-Grant"
# Set by stream/asgi.py on the requests it serves: only there may a stream be granted.
SCOPE_KEY = "lat.stream"
UNAVAILABLE = "unavailable"  # its value when the feed cannot be read (the connect is a 500)


@dataclass(frozen=True)
class Grant:
    filters: Filters
    cursor: int | None  # resume after this id; None: live from now
    slot: Slot


_grants: dict[str, Grant] = {}
_lock = threading.Lock()


def grant_issue(grant: Grant) -> str:
    token = secrets.token_hex(16)
    with _lock:
        _grants[token] = grant
    return token


def grant_take(token: str) -> Grant | None:
    with _lock:
        return _grants.pop(token, None)
