"""OpenAPI helpers: the documented error responses, rate-limit and request-id headers and
conditional GET (If-None-Match, 304, ETag, Cache-Control) of each endpoint."""

from __future__ import annotations

from typing import Any

from drf_spectacular.openapi import AutoSchema
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse

from core.api.conditional import CACHE_CONTROL, ConditionalReadMixin
from core.api.errors import ERROR_CODES
from core.api.fields import ErrorSerializer

ALWAYS = ("unauthorized", "forbidden", "rate_limit_exceeded", "internal_server_error")


def error_responses(*codes: str, always: tuple[str, ...] = ALWAYS) -> dict[int, OpenApiResponse]:
    """Responses for the given error codes, plus those any API endpoint can give: an unknown
    (401) or disabled (403) API key, the rate limit (429), a request line too long (414) and
    500."""
    out: dict[int, OpenApiResponse] = {}
    for code in dict.fromkeys((*codes, *always)):
        status_code, _title, when = ERROR_CODES[code]
        out[status_code] = OpenApiResponse(ErrorSerializer, description=f"`{code}`: {when}")
    out[414] = OpenApiResponse(ErrorSerializer, description=URI_TOO_LONG)
    return out


# The web server's own refusal (latsite/gunicorn.py), before the API sees the request.
URI_TOO_LONG = (
    "`bad_request`: the request line (path and query string) is longer than the web server "
    "accepts, 4,094 bytes by default (gunicorn's `--limit-request-line`)."
)


READ_ERRORS = ("not_found", "unprocessable_entity")

# Every operation: no credential needed, or the optional API key of the `ApiKey` scheme
# (X-API-Token), which raises the caller's rate limit. An unknown key is a 401, a disabled or
# expired one a 403 (`error_responses` documents both).
# Security requirement objects, as extend_schema(auth=...) passes them on (its annotation,
# Sequence[str], names only the schemes' names).
OPTIONAL_API_KEY: Any = [{"ApiKey": []}, {}]

# startAt/endAt: an RFC 3339 full-date or date-time (the server also takes a date-time without
# zone, as UTC: JSON Schema has no format for it, so the descriptions say so).
INSTANT_SCHEMA = {
    "anyOf": [
        {"type": "string", "format": "date"},
        {"type": "string", "format": "date-time"},
    ]
}


def _header(name: str, description: str, response: bool | list[int] = True) -> OpenApiParameter:
    return OpenApiParameter(
        name, OpenApiTypes.INT, OpenApiParameter.HEADER, description=description, response=response
    )


_UNLESS = " Left out while the rate-limit store (Redis) is unreachable: limits then fail open."
# The rate-limit headers of every answer of a rate-limited operation (core/api/throttling.py).
RATE_LIMIT_HEADERS = [
    _header("RateLimit-Limit", "Requests the current window allows this client." + _UNLESS),
    _header(
        "RateLimit-Remaining",
        "Requests left in the current window after this one (0 when exhausted)." + _UNLESS,
    ),
    _header("RateLimit-Reset", "Seconds until the current window ends." + _UNLESS),
    _header("Retry-After", "Seconds to wait before trying again.", response=[429]),
]


_REQUEST_ID = (
    "The request's id in the server's logs: the caller's `X-Request-ID` when it is 1 to 200 "
    "visible ASCII characters, else one the server made."
)
# X-Request-ID on every operation: optional in the request, always in the answer
# (core.middleware.RequestIdMiddleware).
REQUEST_ID_HEADERS = [
    OpenApiParameter(
        "X-Request-ID",
        OpenApiTypes.STR,
        OpenApiParameter.HEADER,
        required=False,
        description="Optional. An id of the caller's for this request, 1 to 200 visible ASCII "
        "characters; returned in the X-Request-ID response header and written on the server's "
        "log lines (any other value is replaced by one the server makes).",
    ),
    OpenApiParameter(
        "X-Request-ID",
        OpenApiTypes.STR,
        OpenApiParameter.HEADER,
        required=True,
        description=_REQUEST_ID,
        response=True,
    ),
]


# Conditional GET on the read operations (core/api/conditional.py).
CONDITIONAL_PARAMETERS = [
    OpenApiParameter(
        "If-None-Match",
        OpenApiTypes.STR,
        OpenApiParameter.HEADER,
        description="ETags of representations the client holds (a comma-separated list, or "
        "`*`); when one matches the current one (weak comparison) the answer is a 304.",
    ),
    OpenApiParameter(
        "ETag",
        OpenApiTypes.STR,
        OpenApiParameter.HEADER,
        description="Weak validator of this representation; it changes whenever the data "
        "behind the service changes. Send it back in If-None-Match.",
        response=[200, 304],
    ),
    OpenApiParameter(
        "Cache-Control",
        OpenApiTypes.STR,
        OpenApiParameter.HEADER,
        description=f"`{CACHE_CONTROL}`: caches may store the answer but must revalidate it "
        "(If-None-Match) before each use, so that it is never older than the service's data "
        "(about 2 s behind the confirmed chain).",
        response=[200, 304],
    ),
]
NOT_MODIFIED = OpenApiResponse(
    description="Not Modified: the representation matching If-None-Match is still current. "
    "No body; the request was counted by the rate limit like any other."
)


class RateLimitedAutoSchema(AutoSchema):
    """drf-spectacular's AutoSchema, documenting X-Request-ID on every operation, the
    rate-limit headers on every response of the operations that a rate limit counts (those whose
    view has throttles), and conditional GET on the read operations (views with
    ConditionalReadMixin)."""

    def _conditional(self) -> bool:
        return self.method == "GET" and isinstance(self.view, ConditionalReadMixin)

    def get_override_parameters(self):
        parameters = [*super().get_override_parameters(), *REQUEST_ID_HEADERS]
        if self.view.get_throttles():
            parameters = [*parameters, *RATE_LIMIT_HEADERS]
        if self._conditional():
            parameters = [*parameters, *CONDITIONAL_PARAMETERS]
        return parameters

    def _get_response_bodies(self, direction="response"):
        bodies = super()._get_response_bodies(direction)
        if self._conditional():
            bodies["304"] = self._get_response_for_code(NOT_MODIFIED, "304", direction=direction)
        return bodies
