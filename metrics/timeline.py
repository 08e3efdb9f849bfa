"""UTC days and hours as the rewards APY and the rates count them (decisions.md): day `d` is
the UTC day; its state is the chain's at the last block before 00:00 UTC of `d`."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

DAY = 86_400
HOUR = 3_600
EPOCH = date(1970, 1, 1)


def utc_day(timestamp: int) -> date:
    """The UTC day of a Unix time."""
    return EPOCH + timedelta(days=timestamp // DAY)


def day_start(day: date) -> int:
    """00:00 UTC of `day`, in Unix seconds."""
    return (day - EPOCH).days * DAY


def day_range(first: date, last: date) -> list[date]:
    """The days first..last, both included (none when first is after last)."""
    return [first + timedelta(days=n) for n in range((last - first).days + 1)]


def last_complete_day(timestamp: int) -> date:
    """The last UTC day that had ended at `timestamp`."""
    return utc_day(timestamp) - timedelta(days=1)


def hour_of(timestamp: int) -> int:
    """The start of the UTC hour of a Unix time."""
    return timestamp - timestamp % HOUR


def as_datetime(timestamp: int) -> datetime:
    return datetime.fromtimestamp(timestamp, tz=UTC)
