"""OpenAPI helpers: the documented error responses of each endpoint."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse

from latsite.api.errors import ERROR_CODES
from latsite.api.fields import ErrorSerializer


def error_responses(*codes: str) -> dict[int, OpenApiResponse]:
    """Responses for the given error codes; 500 is always included."""
    out: dict[int, OpenApiResponse] = {}
    for code in (*codes, "internal_server_error"):
        status_code, _title, when = ERROR_CODES[code]
        out[status_code] = OpenApiResponse(ErrorSerializer, description=f"`{code}`: {when}")
    return out


READ_ERRORS = ("not_found", "unprocessable_entity", "rate_limit_exceeded")
