"""Rate limits shared by every server process: fixed-window counters in the cache (Redis).

DRF's own throttles keep a list of timestamps per client and rewrite it on every request (a
read-modify-write that races between processes); an atomic INCR per window does not.
"""

from __future__ import annotations

import time

from django.conf import settings
from django.core.cache import cache
from rest_framework.throttling import BaseThrottle

UNITS = {
    "s": 1,
    "sec": 1,
    "second": 1,
    "m": 60,
    "min": 60,
    "minute": 60,
    "h": 3600,
    "hour": 3600,
    "d": 86400,
    "day": 86400,
}


def parse_rate(rate: str) -> tuple[int, int]:
    """ "100/min" -> (100, 60)."""
    count, _, unit = rate.partition("/")
    if unit not in UNITS or not count.isdigit():
        raise ValueError(f"a rate looks like 100/min, not {rate!r}")
    return int(count), UNITS[unit]


def _count(key: str, *, ttl: int) -> int:
    """Add one to the window's counter and return it: one round trip to Redis (INCR and
    EXPIRE in a pipeline); add-then-incr on other caches."""
    if hasattr(cache, "client") and hasattr(cache.client, "get_client"):  # django-redis
        pipe = cache.client.get_client(write=True).pipeline(transaction=False)
        full_key = cache.make_key(key)
        pipe.incr(full_key)
        pipe.expire(full_key, ttl)  # the key names its window: renewing the TTL is harmless
        used, _ = pipe.execute()
        return int(used)
    cache.add(key, 0, timeout=ttl)
    try:
        return cache.incr(key)
    except ValueError:  # expired between add and incr
        cache.add(key, 1, timeout=ttl)
        return 1


class ClientRateThrottle(BaseThrottle):
    """RATE_LIMIT_KEYED per API key, RATE_LIMIT_ANON per client IP."""

    def allow_request(self, request, view) -> bool:
        api_key = request.auth
        if api_key is not None:
            limit, window = parse_rate(settings.RATE_LIMIT_KEYED)
            ident = f"key:{api_key.pk}"
        else:
            limit, window = parse_rate(settings.RATE_LIMIT_ANON)
            ident = f"ip:{self.get_ident(request)}"
        now = time.time()
        slot = int(now // window)
        key = f"ratelimit:{ident}:{window}:{slot}"
        used = _count(key, ttl=window + 1)
        self._wait = (slot + 1) * window - now
        return used <= limit

    def wait(self) -> float:
        return self._wait
