"""The project's own errors, raised below the API by selectors, services and parameter parsing.

None of them knows HTTP: the one exception handler (`core/api/errors.py`) maps each `code`
to its status and the error body of interface.md.
"""

from __future__ import annotations


class ServiceError(Exception):
    """A failure the caller should be told of in words; `code` is an error code of the API."""

    code = "internal_server_error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class NotFound(ServiceError):
    """The address (or other key) names nothing the service knows."""

    code = "not_found"


class InvalidInput(ServiceError):
    """A well-formed request with an invalid value; the message names the field."""

    code = "unprocessable_entity"


class Gone(ServiceError):
    """A cursor names records that are no longer kept (deleted by retention): the listing is
    read again from its first page (as a Kubernetes watch answers an expired version)."""

    code = "gone"


class MalformedRequest(ServiceError):
    """A request that cannot be read at all (a body that is not a JSON object, too large)."""

    code = "bad_request"


class Unavailable(ServiceError):
    """A dependency (the chain node) could not answer; nothing was done."""

    code = "internal_server_error"


class Busy(ServiceError):
    """Every slot of a bounded resource is taken; refused at once, retry after some seconds."""

    code = "rate_limit_exceeded"

    def __init__(self, message: str, *, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after
