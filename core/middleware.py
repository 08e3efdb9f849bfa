"""Every path outside /admin/ answers its errors in the JSON error body, whoever produced them.

The API's own views already do (core/api/errors.py); this catches what runs before or beside
them: a query string with more parameters than Django parses, a body declared in a charset other
than UTF-8, and any error page that Django or a library rendered as HTML (or YAML). Admin pages
are left to Django: staff use them in a browser.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Callable

from django.conf import settings
from django.core.exceptions import TooManyFieldsSent
from django.http import HttpRequest, HttpResponse, QueryDict

from core.api.errors import fallback_message, is_json, json_error, suspicious_message
from core.api.throttling import rate_limit_headers
from core.logs import (
    HEADER,
    REQUEST_META_KEY,
    accepted_request_id,
    bind_request_id,
    unbind_request_id,
)

ADMIN_PREFIX = "/admin/"
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
# Replaced along with the body; every other header (Allow, Retry-After, CORS, ...) is kept.
_BODY_HEADERS = frozenset({"content-type", "content-length", "content-encoding"})


def is_admin_path(path: str) -> bool:
    return path.startswith(ADMIN_PREFIX)


def declared_charset_refusal(request: HttpRequest) -> HttpResponse | None:
    """A 400 for a body declared in a charset other than UTF-8 (JSON is UTF-8, RFC 8259)."""
    if request.method not in _BODY_METHODS:
        return None
    charset = (request.content_params or {}).get("charset")
    if charset is None:
        return None
    try:
        utf8 = codecs.lookup(charset).name == "utf-8"
    except LookupError:
        utf8 = False
    if utf8:
        return None
    return json_error(
        "bad_request", "Send the body as UTF-8 (Content-Type: application/json).", 400
    )


# A query string of `name=value` fields in unreserved characters only (RFC 3986): nothing in
# it to unquote or decode, as the API's own parameters are sent.
_PLAIN_QUERY = re.compile(r"[\w.~-]+=[\w.~-]*(?:&[\w.~-]+=[\w.~-]*)*", re.ASCII)


def plain_query(query_string: str) -> QueryDict | None:
    """The QueryDict Django makes of a plain query string (`_PLAIN_QUERY`, within
    DATA_UPLOAD_MAX_NUMBER_FIELDS), made by splitting it: Django's parse (urllib's, then a
    method call per field) cost the LAT detail's three toggles ~15 us a request. None for any
    other query string, which Django parses."""
    limit = settings.DATA_UPLOAD_MAX_NUMBER_FIELDS
    if not _PLAIN_QUERY.fullmatch(query_string) or (
        limit is not None and query_string.count("&") >= limit
    ):
        return None
    fields: dict[str, list[str]] = {}
    for field in query_string.split("&"):
        name, _, value = field.partition("=")
        fields.setdefault(name, []).append(value)
    query = QueryDict()
    dict.update(query, fields)  # a MultiValueDict holds each key's list of values as its value
    return query


def too_many_parameters_refusal(request: HttpRequest) -> HttpResponse | None:
    """A 400 for more query parameters than DATA_UPLOAD_MAX_NUMBER_FIELDS.

    Django parses the query string lazily and raises wherever `request.GET` is first read,
    which inside a DRF view would surface as a 500; read it here, once, instead.
    """
    if "GET" not in request.__dict__ and getattr(request, "_encoding", None) is None:
        query = plain_query(request.META.get("QUERY_STRING", ""))
        if query is not None:
            request.GET = query  # type: ignore[assignment]  # immutable, as the stubs want
            return None
    try:
        request.GET  # noqa: B018
    except TooManyFieldsSent as exc:
        return json_error("bad_request", suspicious_message(exc), 400)
    return None


def as_json_error(request: HttpRequest, response: HttpResponse) -> HttpResponse:
    """The response itself, or, for a non-JSON error, the error body with the same status."""
    if response.status_code < 400 or is_json(response):
        return response
    code, message = fallback_message(request, response.status_code)
    replacement = json_error(code, message, response.status_code)
    for name, value in response.items():
        if name.lower() not in _BODY_HEADERS:
            replacement[name] = value
    replacement.cookies = response.cookies
    return replacement


class JsonErrorPagesMiddleware:
    """Turns non-JSON error responses into the error body on every path outside /admin/.

    First in MIDDLEWARE after SecurityMiddleware, so that it also sees what WhiteNoise answers
    (a POST to a static file is an empty 405) and what the CSRF check refuses."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if is_admin_path(request.path_info):
            return response
        converted = as_json_error(request, response)
        if converted is not response:
            response.close()  # a static file's open handle
        return converted


class MalformedRequestMiddleware:
    """Refuses, with a 400 in the error body, a query string with too many parameters and a
    body declared in a charset other than UTF-8, on every path outside /admin/.

    After CorsMiddleware, so that browsers may read the refusal."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if not is_admin_path(request.path_info):
            refusal = too_many_parameters_refusal(request) or declared_charset_refusal(request)
            if refusal is not None:
                return refusal
        return self.get_response(request)


class RateLimitHeadersMiddleware:
    """Adds RateLimit-Limit, RateLimit-Remaining and RateLimit-Reset to every answer whose
    request a rate limit counted (core/api/throttling.py), errors and 429s included."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        for name, value in rate_limit_headers(request).items():
            response.headers[name] = value
        return response


class RequestIdMiddleware:
    """Takes the caller's X-Request-ID (a sane token: 1 to 200 visible ASCII characters) or makes
    one, keeps it for the request's log lines and tasks (core/logs.py), and returns it in the
    X-Request-ID header of every answer: the API's, errors, admin and static files alike.

    First in MIDDLEWARE, so that every other middleware's log lines carry it too."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        request_id = accepted_request_id(request.headers.get(HEADER))
        # Also on the request: Django logs 4xx and 5xx answers after the middleware returned.
        request.META[REQUEST_META_KEY] = request_id
        token = bind_request_id(request_id)
        try:
            response = self.get_response(request)
        finally:
            unbind_request_id(token)
        response.headers[HEADER] = request_id
        return response
