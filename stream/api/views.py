"""`GET /stream/events` (extensions.md, "Live stream"): this view answers the connect (the API
key, the rate limit, the filters, the cursor, the per-address cap, CORS, or the error body);
the stream process (stream/asgi.py) keeps the granted connection open and sends the events."""

from __future__ import annotations

from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.views import APIView
from rest_framework_api_key.models import APIKey

from core.addresses import ADDRESS_PATTERN
from core.api.params import parse_addresses
from core.api.schema import OPTIONAL_API_KEY, error_responses
from core.api.throttling import client_ident
from core.errors import InvalidInput, NotFound, Unavailable
from stream.feed import feed_high
from stream.grants import (
    GRANT_HEADER,
    SCOPE_KEY,
    UNAVAILABLE,
    Grant,
    grant_issue,
    grants_expire,
)
from stream.slots import slot_acquire
from webhooks.outbox import TYPES, Filters

CURSOR_MAX = 2**63 - 1

_DESCRIPTION = """Server-Sent Events (`text/event-stream`): every event of `GET
/lat/{address}/events`, plus `statusChanged` and `eventRemoved`, as they are indexed (within
2 seconds of their block reaching the confirmation depth). Each message has `id:` (a cursor),
`event:` (the type) and `data:` (the webhook payload `{id, type, createdAt, data}`, as a
webhook delivery carries it). A comment line (`: keep-alive`) every 15 seconds keeps idle
connections open.

**Resume.** A client that reconnects with the last `id:` it received, in the `Last-Event-ID`
header (what `EventSource` sends by itself) or as `?cursor=`, gets every event after it from the
stored feed, then the live ones, without a gap or a repeat; the header wins over the parameter.
Without either, the stream starts with the next event. Cursors are ascending integers, the same
for every filter: a client may change its filters and resume. A cursor ahead of the feed's
newest id is a 422.

**Retention.** The feed keeps `PUSH_RETENTION_DAYS` (default 30) days. A cursor older than
that (`0` too, once anything was deleted) gets one message, `event: reset`, without `id:`,
whose data is `{type: "reset", createdAt, data: {oldestId, cursor, listing, message}}`:
`oldestId` the oldest message id still kept (or null), `cursor` the cursor that replays every
message still kept, `listing` the REST listing to re-read what was missed from
(`/lat/{address}/events`); then the server ends the stream. Close the `EventSource` on it:
reconnecting with the same cursor is answered the same.

**Limits.** The connect counts against the rate limit like any request (an API key raises it; an
unknown key is a 401, a disabled one a 403). A stream opened with a key ends within
`STREAM_KEY_CHECK_SECONDS` (default 30) of that key being disabled, expiring or being deleted
(`EventSource` reconnects, and is refused as above). At most `STREAM_MAX_PER_IP` (default 10)
streams are open per client address (429 beyond, with `Retry-After`). A client that leaves a message
unread for `STREAM_SEND_TIMEOUT` (default 10 s) is disconnected; it resumes with its
`Last-Event-ID`.

**Where.** The stream is served by a process of its own (the Procfile's `stream`, an ASGI
server), to which a reverse proxy routes `/stream/`; the web process answers this path with a
404 naming it."""


def _parameter(name: str, description: str, item_pattern: str, *, many: bool = True):
    pattern = f"^{item_pattern}(,{item_pattern})*$" if many else f"^{item_pattern}$"
    schema = {"type": "string", "pattern": pattern}
    return OpenApiParameter(name, schema, OpenApiParameter.QUERY, description=description)


def _addresses(params, name: str) -> frozenset[str]:
    raw = params.get(name)
    values = [value.strip() for value in raw.split(",")] if raw else []
    return frozenset(parse_addresses(values, field=name))


def _filters(params) -> Filters:
    types: frozenset[str] = frozenset()
    if raw := params.get("types"):
        types = frozenset(t.strip() for t in raw.split(","))
        if not types <= set(TYPES):
            raise InvalidInput(f"types must be a comma-separated list of: {', '.join(TYPES)}.")
    wallets = frozenset(a.lower() for a in _addresses(params, "wallets"))
    return Filters(lats=_addresses(params, "lats"), types=types, wallets=wallets)


def _cursor(request) -> int | None:
    """The id to resume after; a cursor ahead of the feed's newest id is no id of this stream
    (a 422). One older than the feed keeps is the stream's to answer (a `reset`)."""
    header = request.headers.get("Last-Event-ID")
    raw, field = (
        (header, "Last-Event-ID") if header else (request.query_params.get("cursor"), "cursor")
    )
    if raw is None:
        return None
    if not raw.isascii() or not raw.isdigit() or int(raw) > CURSOR_MAX:
        raise InvalidInput(f"{field} must be the id: of a message of this stream.")
    cursor = int(raw)
    if cursor > (newest := feed_high()):
        raise InvalidInput(
            f"{field} {cursor} is ahead of the feed (its newest message id is {newest}): it is "
            "no id: of this stream."
        )
    return cursor


class EventStreamNegotiation(BaseContentNegotiation):
    """Whatever the client accepts, the connect's refusals are the JSON error body.

    Every browser's `EventSource` sends `Accept: text/event-stream`: DRF's default negotiation
    found no renderer for it and refused the connect itself (406). The stream's own answer is no
    DRF response (it is an `HttpResponse` the stream process holds, stream/asgi.py), so the only
    thing rendered here is an error, and an error is JSON for every client."""

    def select_parser(self, request, parsers):
        return parsers[0] if parsers else None

    def select_renderer(self, request, renderers, format_suffix=None):
        return renderers[0], renderers[0].media_type


class StreamEventsView(APIView):
    content_negotiation_class = EventStreamNegotiation

    @extend_schema(
        tags=["Live stream"],
        auth=OPTIONAL_API_KEY,
        operation_id="stream_events",
        summary="Live stream of events (Server-Sent Events)",
        description=_DESCRIPTION,
        parameters=[
            _parameter(
                "lats",
                "Comma-separated LAT proxy addresses. Default: every LAT.",
                ADDRESS_PATTERN.strip("^$"),
            ),
            _parameter(
                "types",
                "Comma-separated types: " + ", ".join(TYPES) + ". Default: all.",
                "(" + "|".join(TYPES) + ")",
            ),
            _parameter(
                "wallets",
                "Comma-separated addresses: only events whose args name one of them as sender, "
                "receiver, from, to, depositor or initiator (never `statusChanged`). Default: "
                "no such filter.",
                ADDRESS_PATTERN.strip("^$"),
            ),
            _parameter(
                "cursor",
                "Resume after this message `id:` (`Last-Event-ID` wins).",
                "[0-9]{1,18}",
                many=False,
            ),
            OpenApiParameter(
                "Last-Event-ID",
                OpenApiTypes.STR,
                OpenApiParameter.HEADER,
                description="Resume after this message `id:` (sent by `EventSource` itself).",
            ),
        ],
        responses={
            (200, "text/event-stream"): OpenApiResponse(
                OpenApiTypes.STR,
                description="The stream: `id:`, `event:` and `data:` lines per message.",
            ),
            **error_responses("not_found", "unprocessable_entity"),
        },
    )
    def get(self, request):
        scope = getattr(request._request, "scope", None) or {}
        if scope.get(SCOPE_KEY) == UNAVAILABLE:
            raise Unavailable("The event feed cannot be read now; retry in a few seconds.")
        if not scope.get(SCOPE_KEY):
            raise NotFound(
                "The live stream is served by the stream process (the Procfile's `stream`): "
                "route /stream/ to it."
            )
        filters, cursor = _filters(request.query_params), _cursor(request)
        grants_expire()  # the slots of connects whose client went away are free again
        slot = slot_acquire(client_ident(request))
        response = HttpResponse(status=200, content_type="text/event-stream; charset=utf-8")
        response["Cache-Control"] = "no-cache"
        response["X-Accel-Buffering"] = "no"  # nginx: pass each message on at once
        key = request.auth.pk if isinstance(request.auth, APIKey) else None
        response[GRANT_HEADER] = grant_issue(Grant(filters, cursor, slot, key))
        return response
