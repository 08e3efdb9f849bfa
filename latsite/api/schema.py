"""OpenAPI helpers: the documented error responses of each endpoint."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse

from latsite.api.errors import ERROR_CODES
from latsite.api.fields import ErrorSerializer

ALWAYS = ("unauthorized", "forbidden", "rate_limit_exceeded", "internal_server_error")


def error_responses(*codes: str) -> dict[int, OpenApiResponse]:
    """Responses for the given error codes, plus those any endpoint can give: an unknown (401)
    or disabled (403) API key, the rate limit (429) and 500."""
    out: dict[int, OpenApiResponse] = {}
    for code in dict.fromkeys((*codes, *ALWAYS)):
        status_code, _title, when = ERROR_CODES[code]
        out[status_code] = OpenApiResponse(ErrorSerializer, description=f"`{code}`: {when}")
    return out


READ_ERRORS = ("not_found", "unprocessable_entity")

# Every operation: no credential needed, or the optional API key of the `ApiKey` scheme
# (X-API-Token), which raises the caller's rate limit. An unknown key is a 401, a disabled or
# expired one a 403 (`error_responses` documents both).
OPTIONAL_API_KEY = [{"ApiKey": []}, {}]

# startAt/endAt: an RFC 3339 full-date or date-time (the server also takes a date-time without
# zone, as UTC: JSON Schema has no format for it, so the descriptions say so).
INSTANT_SCHEMA = {
    "anyOf": [
        {"type": "string", "format": "date"},
        {"type": "string", "format": "date-time"},
    ]
}
