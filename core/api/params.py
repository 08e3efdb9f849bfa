"""Parsing of path and query parameters, with the 422 messages the API promises."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, date, datetime, time
from typing import Any

from django.utils.dateparse import parse_date, parse_datetime
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter

from core.addresses import ADDRESS_PATTERN, address_error, checksum, is_address
from core.errors import InvalidInput

_INT_RE = re.compile(r"[0-9]+")


def parse_address(value: str | None, *, field: str) -> str:
    if value is None or not is_address(value):
        raise InvalidInput(address_error(field))
    return checksum(value)


def parse_addresses(values: Sequence[Any], *, field: str) -> list[str]:
    """Each value an address (InvalidInput naming `field[index]` otherwise), checksummed, the
    repeated ones left out, in their order."""
    return list(
        dict.fromkeys(parse_address(v, field=f"{field}[{i}]") for i, v in enumerate(values))
    )


def parse_toggle(params, name: str) -> bool:
    value = params.get(name)
    if value is None:
        return False
    if value == "true":
        return True
    if value == "false":
        return False
    raise InvalidInput(f"{name} must be 'true' or 'false'.")


def parse_int(params, name: str, *, default: int, minimum: int, maximum: int | None) -> int:
    raw = params.get(name)
    if raw is None:
        return default
    if not _INT_RE.fullmatch(raw) or len(raw.lstrip("0")) > 18:
        bound = f"between {minimum} and {maximum}" if maximum is not None else f">= {minimum}"
        raise InvalidInput(f"{name} must be an integer {bound}.")
    value = int(raw)
    if value < minimum or (maximum is not None and value > maximum):
        bound = f"between {minimum} and {maximum}" if maximum is not None else f">= {minimum}"
        raise InvalidInput(f"{name} must be an integer {bound}.")
    return value


def parse_choice(params, name: str, *, choices: tuple[str, ...], default: str) -> str:
    value = params.get(name)
    if value is None:
        return default
    if value not in choices:
        allowed = ", ".join(f"'{c}'" for c in choices)
        raise InvalidInput(f"{name} must be one of {allowed}.")
    return value


# Instants the API accepts: from the Unix epoch (before any chain) to a day short of the
# largest date Python holds, so that a window reaching back from them never overflows.
EARLIEST_INSTANT = datetime(1970, 1, 1, tzinfo=UTC)
LATEST_INSTANT = datetime(9999, 12, 31, tzinfo=UTC)  # exclusive
INSTANT_RANGE_TEXT = "between 1970-01-01 and 9999-12-30 (UTC)"


def parse_instant(params, name: str, *, end_of_day: bool = False) -> datetime | None:
    """An ISO 8601 date or date-time; a value without zone is UTC. A date alone means the
    start of that day, or with `end_of_day` its last instant (23:59:59.999999)."""
    raw = params.get(name)
    if raw is None:
        return None
    try:
        parsed = _iso_instant(raw, end_of_day=end_of_day)
    except OverflowError:  # a zone offset carries the value past year 1 or 9999
        raise InvalidInput(f"{name} must fall {INSTANT_RANGE_TEXT}.") from None
    if parsed is None:
        raise InvalidInput(f"{name} must be an ISO 8601 date or date-time.")
    if not EARLIEST_INSTANT <= parsed < LATEST_INSTANT:
        raise InvalidInput(f"{name} must fall {INSTANT_RANGE_TEXT}.")
    return parsed


def _iso_instant(raw: str, *, end_of_day: bool) -> datetime | None:
    try:
        # The date first: parse_datetime would read "2026-05-01" as that day's midnight.
        day: date | None = parse_date(raw)
        parsed: datetime | None
        if day is not None:
            parsed = datetime.combine(day, time.max if end_of_day else time.min)
        else:
            parsed = parse_datetime(raw)
    except ValueError:  # well formed but no such date or zone ("2026-13-01")
        return None
    if parsed is None:
        return None
    if parsed.tzinfo is None:
        return parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC)


# OpenAPI descriptions of the shared parameters.
def address_path_parameter(description: str) -> OpenApiParameter:
    return OpenApiParameter(
        "address",
        OpenApiTypes.STR,
        OpenApiParameter.PATH,
        description=f"{description} Must match `{ADDRESS_PATTERN}`; any letter case.",
        pattern=ADDRESS_PATTERN,
    )


def toggle_parameter(name: str, description: str) -> OpenApiParameter:
    return OpenApiParameter(
        name,
        OpenApiTypes.STR,
        OpenApiParameter.QUERY,
        description=f"{description} Exactly `true` or `false`; any other value is a 422.",
        enum=["true", "false"],
        default="false",
    )


# Paging of the listings (extensions.md: take 1..100, default 12).
MAX_TAKE = 100
DEFAULT_TAKE = 12
MAX_SKIP = 10**18 - 1  # parse_int takes at most 18 digits


def parse_skip(params) -> int:
    return parse_int(params, "skip", default=0, minimum=0, maximum=MAX_SKIP)


def parse_take(params) -> int:
    return parse_int(params, "take", default=DEFAULT_TAKE, minimum=1, maximum=MAX_TAKE)


def skip_parameter(noun: str) -> OpenApiParameter:
    return OpenApiParameter(
        "skip",
        {"type": "integer", "minimum": 0, "maximum": MAX_SKIP, "default": 0},
        OpenApiParameter.QUERY,
        description=f"{noun} to skip; an integer 0..{MAX_SKIP} (at most 18 digits).",
    )


def take_parameter(noun: str) -> OpenApiParameter:
    return OpenApiParameter(
        "take",
        {"type": "integer", "minimum": 1, "maximum": MAX_TAKE, "default": DEFAULT_TAKE},
        OpenApiParameter.QUERY,
        description=f"{noun} to return; an integer 1..{MAX_TAKE}.",
    )
