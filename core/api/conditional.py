"""Conditional GET on the read endpoints: ETag, If-None-Match and 304 Not Modified.

Every GET (and HEAD) answer of a read view (`ConditionalReadMixin`) that is a 200 carries

- `ETag`: a weak validator, a hash of the data's generation (core/api/documents.py:
  `current_generation`, which moves on every write to what the read endpoints serve; read in
  the rate limit's round trip to Redis, core/api/throttling.py), the code's version and
  commit (a deployment may change a representation), the path, what the query string selects
  (for a view that answers a stored document, the document's name, made of the parameters as
  parsed; else the query string, its parameters sorted: either way their order does not
  matter), and whatever the view adds (`etag_extra`: the historical endpoint's default window
  moves with the clock). It is computed before the view reads anything, so that a write racing
  the request can only make the tag older than the body, never newer.
- `Cache-Control: public, no-cache`: any cache may store the answer, but must revalidate it
  before every use. The service promises data at most ~2 s behind the confirmed chain (the
  freshness section of extensions.md) and spends most of that budget itself (the follower
  polls the head every second), so no `max-age` is granted: a revalidation costs one Redis
  round trip and an empty 304, and every request still reaches the service, where the rate
  limit counts it and a bad API key is refused.

A request whose `If-None-Match` matches the current tag (weak comparison, a list of tags or
`*`) gets `304 Not Modified` with an empty body and the same validators, without the view
running; it passed authentication and the rate limit first, so it is counted and carries the
RateLimit-* headers like any answer. Errors (4xx, 5xx) carry no ETag.

No `Vary` on X-API-Token: the key only chooses the rate limit, never the body, and since every
use is revalidated at the service a cached answer never stands in for a key's check.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

import orjson
from django.db import InterfaceError, OperationalError
from django.http import HttpResponse, HttpResponseNotModified
from django.utils.http import parse_etags
from rest_framework.response import Response

from core.api import renderers
from core.api.documents import (
    cached_document,
    current_generation,
    document_keys,
    generation_key,
    generation_lsn,
)
from core.api.throttling import prefetched
from core.release import release
from core.replicas import choose_replica, reads_from
from core.replicas import failed as replica_failed

CACHE_CONTROL = "public, no-cache"
CONDITIONAL_METHODS = frozenset({"GET", "HEAD"})


class NotModified(Exception):
    """Raised once the request has passed authentication and the rate limit: answer 304."""


def entity_tag(
    request, extra: str = "", *, generation: str | None = None, document: str | None = None
) -> str:
    """The weak ETag of the representation `request` asks for, at `generation` (default: the
    current one). `document`: the name of the stored document it answers, which stands for the
    query string (it names what the parameters select; cheaper than re-encoding them)."""
    if document is None:
        query = urlencode(sorted(request.GET.lists()), doseq=True)
    else:
        query = f"document:{document}"  # never an encoded query string (`:` is quoted there)
    if generation is None:
        generation = request_generation(request)
    parts = (generation, release(), request.path, query, extra)
    text = "\x1f".join(parts).encode("utf-8", "surrogateescape")
    return f'W/"{hashlib.blake2b(text, digest_size=16).hexdigest()}"'


def request_generation(request) -> str:
    """The data's current generation, as read ahead in the rate limit's round trip."""
    return current_generation(read=prefetched(request, generation_key()))


def none_match(header: str | None, etag: str) -> bool:
    """Whether an If-None-Match header lists `etag` (weak comparison, RFC 9110 13.1.2).
    `*` is not decided here: it matches any current representation, which only the view knows."""
    if not header:
        return False
    opaque = etag.removeprefix("W/")
    return any(tag.removeprefix("W/") == opaque for tag in parse_etags(header) if tag != "*")


def _not_modified(response) -> HttpResponseNotModified:
    """A 304 with the headers of `response` but those of its body."""
    answer = HttpResponseNotModified()
    for name, value in response.items():
        if name.lower() not in ("content-type", "content-length"):
            answer[name] = value
    return answer


_UNNAMED = object()


def _stored(name: str) -> str:
    """The cache name of a document stored as JSON bytes (never one a version before stored as
    its data)."""
    return f"json:{name}"


class _ReplicaReadFailed(Exception):
    """A read on a replica failed: the request is answered again from the primary."""


class ConditionalReadMixin:
    """For a read APIView: ETag and Cache-Control on its 200s, 304 on a matching If-None-Match.

    A listed tag is answered before the view runs (it came from a 200 of this URL at this
    generation); `*` after it, when the view found something to answer (RFC 9110 13.1.2).

    Its reads go to a replica that has replayed the generation its ETag names, where one has
    (core/replicas.py); a replica that fails mid-read leaves the request to the primary, which
    answers it whole again. A view answering a stored document chooses only when it builds the
    document: a document found in the cache is answered by no database."""

    _etag: str | None = None
    _any: bool = False
    _replica: str | None = None
    _primary_only: bool = False
    _routing: contextlib.ExitStack | None = None
    _generation: str = ""  # the data's generation the ETag names (initial)
    _routed: bool = False
    _document_name: object = _UNNAMED  # until worked out (_named)

    def dispatch(self, request, *args, **kwargs):
        self._document_name, self._routed = _UNNAMED, False
        with contextlib.ExitStack() as self._routing:
            try:
                return super().dispatch(request, *args, **kwargs)
            except _ReplicaReadFailed:
                pass
        self._primary_only, self._replica, self._routing = True, None, None
        self._routed = False
        return super().dispatch(request, *args, **kwargs)

    def prefetch_cache_keys(self, request) -> list[str]:
        """Read with the rate limit's counters, in its one round trip to Redis: the data's
        generation, and the view's stored document where it names one."""
        if request.method not in CONDITIONAL_METHODS:
            return []
        name = self._named(request)
        return [generation_key(), *(document_keys(_stored(name)) if name else ())]

    def _named(self, request) -> str | None:
        """document_name, worked out once per request (read ahead, then answered)."""
        if self._document_name is _UNNAMED:
            self._document_name = self.document_name(request)
        return self._document_name  # type: ignore[return-value]

    def document_name(self, request) -> str | None:
        """The name of the document this request reads from the document cache
        (`stored_document`), None where it reads none or its parameters are invalid."""
        return None

    def stored_document(self, request, build: Callable[[], Any]) -> HttpResponse:
        """The answer of a cached document: the JSON bytes it was stored as, read in the rate
        limit's round trip (no rendering, no database on a hit); `build` makes its data on a
        miss, rendered once as every JSON answer is. `build` parses the request's parameters
        itself (a hit needs none of them): where they name no document (`document_name` is
        None: invalid ones), it is called at once, to refuse them. A request whose Accept asks
        for another form (an indentation) gets the stored document rendered for it."""
        name = self._named(request)
        if name is None:
            return Response(build())

        def rendered() -> bytes:
            self._route()  # a miss: the reads start here
            return renderers.render(build())

        body = cached_document(_stored(name), rendered, read=functools.partial(prefetched, request))
        if not renderers.renders_plain(request.accepted_renderer, request.accepted_media_type):
            return Response(orjson.loads(body))  # rendered as the request asks (an indentation)
        return HttpResponse(body, content_type=renderers.JSONRenderer.media_type)

    def etag_extra(self, request) -> str:
        """What the representation depends on besides the data, the path and the query."""
        return ""

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)  # authentication, permissions, rate limits
        if request.method in CONDITIONAL_METHODS:
            generation = request_generation(request)
            extra, document = self.etag_extra(request), self._named(request)
            self._etag = entity_tag(request, extra, generation=generation, document=document)
            header = request.META.get("HTTP_IF_NONE_MATCH")
            self._any = bool(header) and parse_etags(header) == ["*"]
            if none_match(header, self._etag):
                raise NotModified
            self._generation = generation
            if document is None:  # a stored document routes its reads when it is built
                self._route()

    def _route(self) -> None:
        """Send this request's reads to a replica that has replayed the generation its ETag
        names, else to the primary (core/replicas.py); once."""
        if self._routed or not self._generation:
            return
        self._routed = True
        if not self._primary_only:
            self._replica = choose_replica(generation_lsn(self._generation))
        if self._routing is not None:
            self._routing.enter_context(reads_from(self._replica))

    def handle_exception(self, exc):
        if isinstance(exc, NotModified):
            return HttpResponseNotModified()
        if self._replica is not None and isinstance(exc, OperationalError | InterfaceError):
            replica_failed(self._replica, exc)
            raise _ReplicaReadFailed from exc
        return super().handle_exception(exc)

    def finalize_response(self, request, response, *args, **kwargs):
        response = super().finalize_response(request, response, *args, **kwargs)
        if self._etag is None or response.status_code not in (200, 304):
            return response
        if self._any and response.status_code == 200:
            response = _not_modified(response)
        response["ETag"] = self._etag
        response["Cache-Control"] = CACHE_CONTROL
        return response
