"""The one error contract: every failure answers `{"error": {"code", "message", "doc_url"}}`.

The project's own errors (`core.errors`, raised below the API) and DRF's exceptions go
through `exception_handler`; Django's own 404/500 pages (paths no view
matched, crashes outside DRF) go through `handler404`/`handler500`, wired in latsite/urls.py.
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.core.exceptions import (
    PermissionDenied,
    RequestDataTooBig,
    SuspiciousOperation,
    TooManyFieldsSent,
)
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from rest_framework import exceptions, status
from rest_framework.response import Response

from core import errors

logger = logging.getLogger(__name__)

# code -> (HTTP status, title, when it is returned). The docs page renders this table.
ERROR_CODES: dict[str, tuple[int, str, str]] = {
    "bad_request": (
        400,
        "Bad request",
        "The body is not JSON, not a JSON object, not UTF-8, or not sent as "
        "application/json; the query string has more than 1,000 parameters; "
        "or the HTTP method is not allowed on this path (405); or the web server refused the "
        "request before the API saw it: a request line longer than 4,094 bytes (414), header "
        "fields too large (431), not HTTP/1.1 (400).",
    ),
    "unauthorized": (
        401,
        "Unauthorized",
        "An API key was presented in X-API-Token and is unknown.",
    ),
    "forbidden": (
        403,
        "Forbidden",
        "The API key presented is known but disabled, or the resource is for staff only.",
    ),
    "not_found": (
        404,
        "Not found",
        "The path is unknown, or the address names no LAT, token, operator or AVS "
        "that the service knows.",
    ),
    "gone": (
        410,
        "Gone",
        "A cursor names records the service no longer keeps (the webhook deliveries listing "
        "keeps DELIVERY_RETENTION_DAYS, 14 days by default): what followed it is deleted, so "
        "the listing cannot go on from it. Read the listing again from its first page.",
    ),
    "unprocessable_entity": (
        422,
        "Unprocessable entity",
        "The request is well formed but a value is invalid: an address that does not match "
        "^0x[a-fA-F0-9]{40}$, an amount that is not a decimal integer, empty or unequal "
        "assets/amounts, a toggle other than true/false, paging out of range, an asset the "
        "LAT does not support, a historical window that is reversed or too long, or a "
        "startAt/endAt outside 1970-01-01..9999-12-30. "
        "The message names the field (and index).",
    ),
    "rate_limit_exceeded": (
        429,
        "Rate limit exceeded",
        "Too many requests from this client in the current window; retry after the number "
        "of seconds in the Retry-After header.",
    ),
    "internal_server_error": (
        500,
        "Internal server error",
        "Something unexpected failed on the service's side, or the chain node could not be "
        "reached during a simulation. The failure is logged; the message carries no internals.",
    ),
}

STATUS_TO_CODE = {status_code: code for code, (status_code, _, _) in ERROR_CODES.items()}
STATUS_TO_CODE[405] = "bad_request"
STATUS_TO_CODE[415] = "bad_request"
STATUS_TO_CODE[406] = "bad_request"


def doc_url(code: str) -> str:
    return f"{settings.DOCS_URL}/errors#{code}"


def error_body(code: str, message: str) -> dict:
    return {"error": {"code": code, "message": message, "doc_url": doc_url(code)}}


def suspicious_message(exc: SuspiciousOperation) -> str:
    """What was wrong with a request Django refused as suspicious, without echoing it."""
    if isinstance(exc, TooManyFieldsSent):
        limit = settings.DATA_UPLOAD_MAX_NUMBER_FIELDS
        return f"The request has too many query or form parameters (at most {limit})."
    if isinstance(exc, RequestDataTooBig):
        return "The request body is too large."
    return "The request is malformed."


def _flatten(detail, prefix: str = "") -> list[str]:
    """Turn DRF's nested validation detail into "field[index]: message" lines."""
    if isinstance(detail, dict):
        out: list[str] = []
        for key, value in detail.items():
            name = key if key != "non_field_errors" else ""
            if isinstance(key, int):
                path = f"{prefix}[{key}]"
            else:
                path = f"{prefix}.{name}" if prefix and name else (name or prefix)
            out.extend(_flatten(value, path))
        return out
    if isinstance(detail, list):
        out = []
        for index, item in enumerate(detail):
            if isinstance(item, dict | list) and item:
                out.extend(_flatten(item, f"{prefix}[{index}]"))
            elif item:
                out.extend(_flatten(item, prefix))
        return out
    text = str(detail)
    return [f"{prefix}: {text}" if prefix else text]


def _translated(exc: Exception) -> Exception:
    """Django's exceptions as the API's."""
    if isinstance(exc, Http404):
        return exceptions.NotFound()
    if isinstance(exc, PermissionDenied):
        return exceptions.PermissionDenied()
    if isinstance(exc, SuspiciousOperation):  # too many query parameters, among others
        return errors.MalformedRequest(suspicious_message(exc))
    return exc


def _api_error(exc: exceptions.APIException, headers: dict[str, str]) -> tuple[str, int, str]:
    """(code, status, message) of one of DRF's exceptions; response headers go in `headers`."""
    if isinstance(exc, exceptions.ValidationError):
        return "unprocessable_entity", 422, "; ".join(_flatten(exc.detail)) or "Invalid input."
    if isinstance(exc, exceptions.ParseError):
        return "bad_request", 400, "The request body is not valid JSON."
    if isinstance(exc, exceptions.UnsupportedMediaType):
        return "bad_request", 400, "Send the body as application/json."
    if isinstance(exc, exceptions.MethodNotAllowed):
        return "bad_request", 405, str(exc.detail)
    if isinstance(exc, exceptions.NotAuthenticated | exceptions.AuthenticationFailed):
        auth_header = getattr(exc, "auth_header", None)  # set by DRF from authenticate_header()
        if auth_header:
            headers["WWW-Authenticate"] = auth_header
        return "unauthorized", 401, str(exc.detail)
    if isinstance(exc, exceptions.Throttled):
        wait = getattr(exc, "wait", None)  # set by Throttled.__init__; not in its stub
        if wait is not None:
            headers["Retry-After"] = str(int(wait + 0.999))
        return "rate_limit_exceeded", 429, "Too many requests; retry later."
    status_code = exc.status_code
    code = STATUS_TO_CODE.get(status_code, "internal_server_error")
    message = (
        str(exc.detail)
        if not isinstance(exc.detail, dict | list)
        else "; ".join(_flatten(exc.detail))
    )
    if status_code >= 500:
        logger.error("API error %s", exc, exc_info=exc)
        message = ERROR_CODES["internal_server_error"][1] + "."
    return code, status_code, message


def exception_handler(exc, context) -> Response:
    headers: dict[str, str] = {}
    exc = _translated(exc)
    logged = False  # here, with its traceback
    if isinstance(exc, errors.ServiceError):
        code, message = exc.code, exc.message
        status_code = ERROR_CODES[code][0]
        if isinstance(exc, errors.Busy):
            headers["Retry-After"] = str(exc.retry_after)
    elif isinstance(exc, exceptions.APIException):
        code, status_code, message = _api_error(exc, headers)
        logged = status_code >= 500  # _api_error logs those
    else:
        request = context.get("request")
        logger.exception(
            "Unhandled error on %s %s",
            getattr(request, "method", "?"),
            getattr(request, "path", "?"),
            exc_info=exc,
        )
        code, status_code = "internal_server_error", 500
        message = "Internal server error. The failure has been logged."
        logged = True
    if code == "internal_server_error" and status_code != 500:
        status_code = 500
    response = Response(error_body(code, message), status=status_code, headers=headers)
    # Django's request log would add a bare "Internal Server Error" line for one logged here.
    response._has_been_logged = logged  # type: ignore[attr-defined]
    return response


def json_error(code: str, message: str, status_code: int) -> JsonResponse:
    return JsonResponse(error_body(code, message), status=status_code)


def method_not_allowed(request: HttpRequest, allowed: list[str]) -> JsonResponse:
    """A 405 in the error body, with the Allow header."""
    response = json_error(
        "bad_request", f'Method "{request.method}" not allowed on {request.path}.', 405
    )
    response["Allow"] = ", ".join(allowed)
    return response


def fallback_message(request: HttpRequest, status_code: int) -> tuple[str, str]:
    """(code, message) for an error response that Django or a library produced as HTML."""
    if status_code >= 500:
        return "internal_server_error", "Internal server error. The failure has been logged."
    if status_code == 404:
        return "not_found", f"No endpoint at {request.path}."
    if status_code == 405:
        return "bad_request", f'Method "{request.method}" not allowed on {request.path}.'
    code = STATUS_TO_CODE.get(status_code, "bad_request")
    return code, ERROR_CODES[code][1] + "."


def is_json(response: HttpResponse) -> bool:
    return response.get("Content-Type", "").split(";")[0].strip() == "application/json"


def handler404(request, exception=None) -> JsonResponse:
    return json_error("not_found", f"No endpoint at {request.path}.", status.HTTP_404_NOT_FOUND)


def handler500(request) -> JsonResponse:
    return json_error(
        "internal_server_error", "Internal server error. The failure has been logged.", 500
    )


def handler400(request, exception=None) -> JsonResponse:
    if isinstance(exception, SuspiciousOperation):
        return json_error("bad_request", suspicious_message(exception), 400)
    return json_error("bad_request", "Bad request.", 400)


def handler403(request, exception=None) -> JsonResponse:
    return json_error("forbidden", "Forbidden.", 403)
