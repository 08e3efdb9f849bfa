"""Opaque cursors for the listings that page by key: a version tag and the last record's key
(non-negative integers), base64url without padding. A cursor that this service did not make,
or that names another listing, is a 422 (InvalidInput)."""

from __future__ import annotations

import base64
import binascii

from drf_spectacular.utils import OpenApiParameter

from core.errors import InvalidInput

CURSOR_MAX_LENGTH = 200


def cursor_encode(version: str, *key: int) -> str:
    text = ":".join([version, *(str(part) for part in key)])
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def cursor_decode(value: str, version: str, parts: int) -> tuple[int, ...]:
    """The key a cursor of `version` names (`parts` integers)."""
    error = InvalidInput("cursor is not a cursor this service returned in meta.next.")
    if not value or len(value) > CURSOR_MAX_LENGTH:
        raise error
    try:
        text = base64.urlsafe_b64decode(value + "=" * (-len(value) % 4)).decode("ascii")
        tag, *numbers = text.split(":")
        key = tuple(int(n) for n in numbers)
    except (ValueError, UnicodeDecodeError, binascii.Error):
        raise error from None
    if tag != version or len(key) != parts or min(key) < 0 or cursor_encode(version, *key) != value:
        raise error
    return key


def cursor_parameter(description: str = "`meta.next` of the previous page.") -> OpenApiParameter:
    """The `cursor` query parameter of a listing paged by these cursors."""
    return OpenApiParameter(
        "cursor",
        {"type": "string", "maxLength": CURSOR_MAX_LENGTH},
        OpenApiParameter.QUERY,
        description=description,
    )
