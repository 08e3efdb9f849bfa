"""METRICS_ALLOWED_IPS as networks: parsed when the settings load (a bad entry stops the process
at start) and for each scrape's check (latsite/views.py), by the same function."""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from functools import lru_cache

from django.core.exceptions import ImproperlyConfigured

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def allowed_networks(entries: Sequence[str]) -> tuple[Network, ...]:
    """The IPs and CIDRs of `entries` (blank ones skipped); ImproperlyConfigured naming the
    setting for one that is neither."""
    return _networks(tuple(entries))


@lru_cache(maxsize=8)
def _networks(entries: tuple[str, ...]) -> tuple[Network, ...]:
    try:
        return tuple(ipaddress.ip_network(e.strip(), strict=False) for e in entries if e.strip())
    except ValueError as exc:
        raise ImproperlyConfigured(f"METRICS_ALLOWED_IPS: {exc}") from exc
