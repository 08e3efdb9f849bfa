"""Rate limits shared by every server process: fixed-window counters in the cache (Redis).

DRF's own throttles keep a list of timestamps per client and rewrite it on every request (a
read-modify-write that races between processes); an atomic INCR per window does not.

Clients are counted per API key when one authenticated, else per client address: an IPv4
address, or an IPv6 /64 network (one subscriber's allocation, within which addresses are free
to rotate). Requests with a bad key (unknown, disabled, expired) count per client address too,
and past RATE_LIMIT_ANON in a window their keys are no longer even looked up (auth.py).

Where a view has several limits (simulate-deposit), `CombinedRateThrottle` counts them in one
round trip (one pipeline of INCR and EXPIRE per window). A view may name cache keys it reads on
every request (`prefetch_cache_keys`: the read endpoints' data generation, for their ETags); they
are read in that same round trip.

Limits fail open: while Redis cannot be reached (core/redisguard.py) every request is let
through and the outage is logged at most once a minute per process.

Every counted request carries its window in the headers (RateLimitHeadersMiddleware, from
`note_window`): `RateLimit-Limit` (requests the window allows), `RateLimit-Remaining` (left in it
after this one, never below 0) and `RateLimit-Reset` (whole seconds until it ends, rounded up,
as Retry-After). Where several limits count one request (simulate-deposit), the headers describe
the one with the fewest requests left. While Redis is away nothing is counted, so the headers
are left out rather than guessed.
"""

from __future__ import annotations

import ipaddress
import math
import threading
import time
from collections.abc import Sequence
from typing import Any

from django.conf import settings
from django.core.cache import DEFAULT_CACHE_ALIAS, cache, caches
from rest_framework import exceptions
from rest_framework.throttling import BaseThrottle

from core import redisguard, telemetry

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
IPV6_PREFIX = 64
# Where the tightest counted window of a request is kept for RateLimitHeadersMiddleware.
WINDOW_ATTRIBUTE = "_lat_rate_limit"
# The cache values read with the counters (count_windows): (keys read, values found).
PREFETCH_ATTRIBUTE = "_lat_prefetched"
RATE_LIMIT_HEADERS = ("RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset")


def parse_rate(rate: str) -> tuple[int, int]:
    """ "100/min" -> (100, 60)."""
    count, _, unit = rate.partition("/")
    if unit not in UNITS or not count.isdigit():
        raise ValueError(f"a rate looks like 100/min, not {rate!r}")
    return int(count), UNITS[unit]


def client_ident(request) -> str:
    """The client's address as DRF finds it (NUM_PROXIES), an IPv6 one cut to its /64."""
    ident = BaseThrottle().get_ident(request) or ""
    try:
        address = ipaddress.ip_address(ident.strip().strip("[]"))
    except ValueError:
        return ident
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network((int(address), IPV6_PREFIX), strict=False))
    return str(address)


def _is_django_redis(backend: Any = None) -> bool:
    backend = cache if backend is None else backend
    return hasattr(backend, "client") and hasattr(backend.client, "get_client")


def _count(key: str, *, ttl: int) -> int:
    """Add one to a window's counter and return it (see _count_many)."""
    return _count_many([(key, ttl)])[0][0]


def _count_many(
    counters: Sequence[tuple[str, int]], reads: Sequence[str] = ()
) -> tuple[list[int], dict[str, Any] | None]:
    """Add one to each (key, ttl) counter and return their totals, with the cache's values of
    `reads` (keys as given to the cache; absent keys left out): one round trip to Redis (INCR
    and EXPIRE of every counter and one MGET of the reads, in one pipeline); add-then-incr on
    other caches, where nothing is read ahead (None)."""
    # The cache itself, not the `cache` proxy, which looks it up again on every attribute.
    backend: Any = caches[DEFAULT_CACHE_ALIAS]
    if _is_django_redis(backend):
        client = backend.client  # django-redis's own (checked above)
        pipe = client.get_client(write=True).pipeline(transaction=False)
        make_key = backend.make_key
        for key, ttl in counters:
            full_key = make_key(key)
            pipe.incr(full_key)
            pipe.expire(full_key, ttl)  # the key names its window: renewing the TTL is harmless
        reads = list(dict.fromkeys(reads))  # each key once
        if reads:
            pipe.mget([make_key(key) for key in reads])
        answers = pipe.execute()
        used = [int(n) for n in answers[: 2 * len(counters) : 2]]
        if not reads:
            return used, {}
        values = zip(reads, answers[2 * len(counters)], strict=True)
        decode = client.decode
        return used, {key: decode(raw) for key, raw in values if raw is not None}
    return [_count_locally(key, ttl=ttl) for key, ttl in counters], None


def _count_locally(key: str, *, ttl: int) -> int:
    cache.add(key, 0, timeout=ttl)
    try:
        return cache.incr(key)
    except ValueError:  # expired between add and incr
        cache.add(key, 1, timeout=ttl)
        return 1


def count_windows(windows: Sequence[Window], *, request=None, view=None) -> list[int] | None:
    """Count one request in each window, in one round trip, and return their totals; None
    while Redis is away. The cache keys that `view` reads for every request
    (`prefetch_cache_keys`) are read in the same round trip and kept on `request`
    (`prefetched`)."""
    counters = [(window.key, window.ttl) for window in windows]
    reads = view.prefetch_cache_keys(request) if hasattr(view, "prefetch_cache_keys") else ()
    answer = redisguard.call("rate limit", lambda: _count_many(counters, reads))
    if answer is redisguard.UNAVAILABLE:
        return None
    used, values = answer
    if reads and values is not None:
        setattr(_http_request(request), PREFETCH_ATTRIBUTE, (frozenset(reads), values))
    return used


def prefetched(request, key: str) -> tuple[bool, Any]:
    """(True, the value or None when absent) when the throttle read `key` for this request
    (count_windows), else (False, None)."""
    noted: tuple[frozenset[str], dict[str, Any]] | None = getattr(
        _http_request(request), PREFETCH_ATTRIBUTE, None
    )
    if noted is None or key not in noted[0]:
        return False, None
    return True, noted[1].get(key)


def _http_request(request):
    """The HttpRequest behind a DRF Request (middleware sees only the former)."""
    return getattr(request, "_request", request)


def note_window(request, *, limit: int, used: int, wait: float) -> None:
    """Remember this window for the response's headers, unless one with fewer requests left
    was noted already."""
    remaining = max(0, limit - used)
    target = _http_request(request)
    noted = getattr(target, WINDOW_ATTRIBUTE, None)
    if noted is None or remaining < noted[1]:
        setattr(target, WINDOW_ATTRIBUTE, (limit, remaining, max(0, math.ceil(wait))))


def rate_limit_headers(request) -> dict[str, str]:
    """The RateLimit-* headers of the window noted on `request`; none if nothing was counted."""
    noted = getattr(request, WINDOW_ATTRIBUTE, None)
    return {} if noted is None else dict(zip(RATE_LIMIT_HEADERS, map(str, noted), strict=True))


class Window:
    """The fixed window `rate` puts `now` in, for one scope and client."""

    def __init__(self, scope: str, ident: str, rate: str) -> None:
        self.limit, length = parse_rate(rate)
        now = time.time()
        slot = int(now // length)
        self.key = f"{scope}:{ident}:{length}:{slot}"
        self.ttl = length + 1
        self.wait = (slot + 1) * length - now

    def count(self, *, request=None, view=None) -> int | None:
        """Count one request and return the window's total; None while Redis is away."""
        used = count_windows([self], request=request, view=view)
        return None if used is None else used[0]

    def hit(self, request, view=None) -> bool:
        """Count one request and note it for the headers; whether it is within the limit
        (True while Redis is away)."""
        used = self.count(request=request, view=view)
        if used is None:
            return True
        note_window(request, limit=self.limit, used=used, wait=self.wait)
        return used <= self.limit


class FixedWindowThrottle(BaseThrottle):
    """A fixed-window counter per identity; subclasses name the scope and pick the limit."""

    scope = "ratelimit"

    def limit_and_ident(self, request) -> tuple[str, str]:
        raise NotImplementedError

    def rejection_scope(self, ident: str) -> str:
        """The `scope` label of a rejection (core/telemetry.py) by the identity counted."""
        raise NotImplementedError

    def get_ident(self, request) -> str:
        return client_ident(request)

    def allow_request(self, request, view) -> bool:
        rate, ident = self.limit_and_ident(request)
        window = Window(self.scope, ident, rate)
        self._wait = window.wait
        allowed = window.hit(request, view)
        if not allowed:
            telemetry.rate_limit_rejected(self.rejection_scope(ident))
        return allowed

    def wait(self) -> float:
        return self._wait


class ClientRateThrottle(FixedWindowThrottle):
    """RATE_LIMIT_KEYED per API key, RATE_LIMIT_ANON per client IP."""

    scope = "ratelimit"

    def limit_and_ident(self, request) -> tuple[str, str]:
        api_key = request.auth
        if api_key is not None:
            return settings.RATE_LIMIT_KEYED, f"key:{api_key.pk}"
        return settings.RATE_LIMIT_ANON, f"ip:{self.get_ident(request)}"

    def rejection_scope(self, ident: str) -> str:
        return "keyed" if ident.startswith("key:") else "anon"


class SimulateRateThrottle(FixedWindowThrottle):
    """RATE_LIMIT_SIMULATE (default 20/min) per API key, else per client IP, with counters of
    its own: simulate-deposit calls a node per request. Used on top of ClientRateThrottle."""

    scope = "ratelimit-simulate"

    def limit_and_ident(self, request) -> tuple[str, str]:
        rate = getattr(settings, "RATE_LIMIT_SIMULATE", "20/min")
        api_key = request.auth
        if api_key is not None:
            return rate, f"key:{api_key.pk}"
        return rate, f"ip:{self.get_ident(request)}"

    def rejection_scope(self, ident: str) -> str:
        return "simulate"


class CombinedRateThrottle(BaseThrottle):
    """The limits of `throttle_classes` counted together, in one round trip to Redis, with the
    same outcome as listing those classes in `throttle_classes` of a view: every limit counts the
    request; it is refused when any is exceeded, after the longest wait of those exceeded; the
    headers describe the window with the fewest requests left; each rejection is counted under
    its own scope; all fail open while Redis is away."""

    throttle_classes: tuple[type[FixedWindowThrottle], ...] = ()

    def allow_request(self, request, view) -> bool:
        throttles = [throttle_class() for throttle_class in self.throttle_classes]
        idents, windows = [], []
        for throttle in throttles:
            rate, ident = throttle.limit_and_ident(request)
            idents.append(ident)
            windows.append(Window(throttle.scope, ident, rate))
        self._wait = 0.0
        counted = count_windows(windows, request=request, view=view)
        if counted is None:
            return True
        exceeded = []
        for throttle, ident, window, used in zip(throttles, idents, windows, counted, strict=True):
            note_window(request, limit=window.limit, used=used, wait=window.wait)
            if used > window.limit:
                telemetry.rate_limit_rejected(throttle.rejection_scope(ident))
                exceeded.append(window.wait)
        self._wait = max(exceeded, default=0.0)
        return not exceeded

    def wait(self) -> float:
        return self._wait


class SimulateThrottle(CombinedRateThrottle):
    """simulate-deposit's limits: ClientRateThrottle's and SimulateRateThrottle's, in one round
    trip."""

    throttle_classes = (ClientRateThrottle, SimulateRateThrottle)


class BadKeyLimit:
    """Requests with a bad API key, per client IP, at RATE_LIMIT_ANON, checked before the key is
    looked up (auth.py): past the limit a bad key costs no database query.

    Bad keys are counted in Redis, shared by every process; a process also remembers, until the
    window ends, the clients it saw use up their budget, so that the check before the lookup
    costs no Redis round trip (a key's owner pays nothing for it) and another process looks up
    at most one more bad key of that client before it knows too.
    """

    scope = "ratelimit-badkey"
    _exhausted: dict[str, float] = {}  # window key -> when the window ends (time.time())
    _lock = threading.Lock()

    def __init__(self, request) -> None:
        self.request = request
        self.window = Window(self.scope, f"ip:{client_ident(request)}", settings.RATE_LIMIT_ANON)

    def check(self) -> None:
        """Raise Throttled (429) when this client is known to have used up its budget."""
        if self.window.key in self._exhausted:
            limit = self.window.limit
            note_window(self.request, limit=limit, used=limit, wait=self.window.wait)
            self._reject()

    def record(self) -> None:
        """Count one bad key (noted for the headers); raise Throttled if it is over the budget."""
        used = self.window.count()
        if used is None:
            return
        note_window(self.request, limit=self.window.limit, used=used, wait=self.window.wait)
        if used < self.window.limit:
            return
        now = time.time()
        with self._lock:
            for key in [k for k, end in self._exhausted.items() if end <= now]:
                del self._exhausted[key]
            self._exhausted[self.window.key] = now + self.window.wait
        if used > self.window.limit:
            self._reject()

    def _reject(self) -> None:
        telemetry.rate_limit_rejected("bad-key")
        raise exceptions.Throttled(wait=self.window.wait)
