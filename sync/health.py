"""Service health (`GET /health`) and version (`GET /version`).

`service_health()` answers within a second whatever is down:

- The database: a probe opens a connection of its own (the settings of DATABASES["default"],
  with libpq's `connect_timeout` and a `statement_timeout`) in a thread of its own and runs
  `SELECT 1`; the request waits for it at most HEALTH_DB_TIMEOUT seconds. A database that refuses
  connections fails at once; one that accepts them and never answers is reported down after
  HEALTH_DB_TIMEOUT while its probe thread ends on its own (connect_timeout: libpq's minimum, 2 s).
  At most one probe per set of connection settings is in flight: later requests wait on it.
- Redis (when the default cache is Redis, i.e. REDIS_URL is set): a PING on a connection of its
  own with HEALTH_REDIS_TIMEOUT socket timeouts, through the process's Redis breaker
  (core/redisguard.py): while the breaker leaves Redis alone after a failure the check says
  so without a round trip, a failed PING opens the breaker for the API too, and a PING that
  answers closes it.
- Chains and LATs: read from the LATs' sync statuses (lats.models.SyncStatus) with a
  statement_timeout, only once the database probe answered.

Chains: `lastHead` is the highest `last_block` that any job of the chain's LATs last succeeded at
(the state job reads at the head). `nodeAnswered` looks at the chain's most recent job run (the
latest success or error time over its LATs' jobs): false when that run failed with
ChainUnavailable (the node could not be reached, timed out or answered garbage), true otherwise,
null when no job ever ran.

LATs: `lastIndexedBlock` is the last block its deposits job indexed (which stays
CHAIN_CONFIRMATIONS blocks behind the head); `lagBlocks` = the chain's `lastHead` minus it;
`lagSeconds` = now minus the older of the last successes of its `deposits` and `state` jobs
(null while either never succeeded). A LAT lags when `lagSeconds` is null or above
SYNC_LAG_ALERT_SECONDS. `gaps` lists what the service cannot know of the LAT until staff or a
manifest tell it (`lats.sync_status.lat_gaps`: a unit of account without a price feed, an
EigenLayer core contract that no preset, manifest or override names, a function chain.md names
that the deployment lacks); it does not change the status.

Webhooks: the dispatcher's lag (webhooks/telemetry.py's queue_lag), `lagging` when the oldest
event or delivery due has waited more than WEBHOOK_LAG_ALERT_SECONDS.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

import redis
from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connection, connections, transaction
from django.db.utils import load_backend
from django.utils import timezone

from core import redisguard
from core.replicas import replica_aliases, replicas_health
from lats.models import Lat, PriceFeed, SyncStatus
from lats.sync_status import lat_gaps
from webhooks.telemetry import queue_lag

HEALTH_DB_TIMEOUT: Final = 0.6  # seconds a request waits for the database probe
HEALTH_REDIS_TIMEOUT: Final = 0.2  # connect and socket timeouts of the Redis PING, each
PROBE_CONNECT_TIMEOUT: Final = 2  # libpq's minimum, seconds
STATEMENT_TIMEOUT_MS: Final = 300  # the probe's SELECT 1 and the sync-status reads
LAG_JOBS: Final = (SyncStatus.Job.DEPOSITS, SyncStatus.Job.STATE)
NODE_ERROR: Final = "ChainUnavailable"

OK, DEGRADED, DOWN = "ok", "degraded", "down"


# --- the database -------------------------------------------------------------------------------


def _probe_settings(settings_dict: dict[str, Any]) -> dict[str, Any]:
    """A copy of a connection's settings for a one-off probe connection, bounded on PostgreSQL."""
    probe = {**settings_dict, "CONN_MAX_AGE": 0, "CONN_HEALTH_CHECKS": False}
    options = dict(settings_dict.get("OPTIONS") or {})
    options.pop("pool", None)  # one connection, closed at once
    if "postgresql" in settings_dict["ENGINE"]:
        options["connect_timeout"] = PROBE_CONNECT_TIMEOUT
        timeout = f"-c statement_timeout={STATEMENT_TIMEOUT_MS}"
        options["options"] = f"{options.get('options', '')} {timeout}".strip()
    probe["OPTIONS"] = options
    return probe


def _ping_database(settings_dict: dict[str, Any]) -> None:
    backend = load_backend(settings_dict["ENGINE"])
    wrapper = backend.DatabaseWrapper(settings_dict, alias="health-probe")
    try:
        with wrapper.cursor() as cursor:
            cursor.execute("SELECT 1")
    finally:
        wrapper.close()


_probes: dict[tuple, Future] = {}
_probes_lock = threading.Lock()


def _start_probe(settings_dict: dict[str, Any]) -> Future:
    """The in-flight probe of these connection settings, or a new one in a thread of its own."""
    probe_settings = _probe_settings(settings_dict)
    key = tuple(sorted((k, repr(v)) for k, v in probe_settings.items()))
    with _probes_lock:
        future = _probes.get(key)
        if future is not None and not future.done():
            return future
        future = _probes[key] = Future()

    def run() -> None:
        try:
            _ping_database(probe_settings)
        except BaseException as exc:
            future.set_exception(exc)
        else:
            future.set_result(None)

    threading.Thread(target=run, name="health-db-probe", daemon=True).start()
    return future


def _database_check(probe: Future, started: float) -> dict[str, Any]:
    try:
        probe.result(timeout=max(0.0, HEALTH_DB_TIMEOUT - (time.monotonic() - started)))
    except FutureTimeout:
        return {"status": DOWN, "error": f"no answer within {HEALTH_DB_TIMEOUT} s"}
    except Exception as exc:  # never the message: it may name the host and user
        return {"status": DOWN, "error": f"unreachable ({type(exc).__name__})"}
    return {"status": OK, "error": None}


# --- Redis --------------------------------------------------------------------------------------


def redis_location() -> str | None:
    """The default cache's Redis URL, or None when the cache is not Redis (REDIS_URL unset)."""
    cache = settings.CACHES.get("default", {})
    if "redis" not in cache.get("BACKEND", "").lower():
        return None
    location = cache.get("LOCATION")
    return location[0] if isinstance(location, list | tuple) else location


def _ping_redis(location: str) -> bool:
    client = redis.Redis.from_url(
        location,
        socket_connect_timeout=HEALTH_REDIS_TIMEOUT,
        socket_timeout=HEALTH_REDIS_TIMEOUT,
    )
    try:
        return bool(client.ping())
    finally:
        client.close()


def _redis_check(location: str) -> dict[str, Any]:
    if not redisguard.breaker.allow():
        return {"status": DOWN, "error": "failed recently; left alone until REDIS_RETRY_AFTER"}
    try:
        _ping_redis(location)
    except redisguard.REDIS_ERRORS as exc:
        redisguard.breaker.failure("health check", exc)
        return {"status": DOWN, "error": f"unreachable ({type(exc).__name__})"}
    redisguard.breaker.success()
    return {"status": OK, "error": None}


# --- chains and LATs ----------------------------------------------------------------------------


@dataclass
class _Event:
    at: datetime
    failed: bool
    node_error: bool


def _last_event(row: dict[str, Any]) -> _Event | None:
    """A status row's latest run: its error while `last_error` is set (a success clears it)."""
    if row["last_error"]:
        if row["last_error_at"] is None:
            return None
        node_error = row["last_error"].startswith(f"{NODE_ERROR}:")
        return _Event(row["last_error_at"], True, node_error)
    if row["last_success_at"] is None:
        return None
    return _Event(row["last_success_at"], False, False)


def _chain_check(chain_id: int, rows: list[dict[str, Any]]) -> dict[str, Any]:
    heads = [r["last_block"] for r in rows if r["last_success_at"] and r["last_block"] is not None]
    events = [e for e in map(_last_event, rows) if e is not None]
    last = max(events, key=lambda e: e.at, default=None)
    answered = None if last is None else not last.node_error
    return {
        "chainId": chain_id,
        "status": "unknown" if answered is None else OK if answered else DOWN,
        "lastHead": max(heads, default=None),
        "nodeAnswered": answered,
        "lastJobAt": last.at if last else None,
    }


def _lat_check(
    lat: Lat,
    rows: list[dict[str, Any]],
    head: int | None,
    now: datetime,
    feeds: set[tuple[int, str]],
) -> dict[str, Any]:
    by_job = {r["job"]: r for r in rows}
    deposits = by_job.get(SyncStatus.Job.DEPOSITS, {})
    indexed = deposits.get("last_block") if deposits.get("last_success_at") else None
    successes = [by_job.get(job, {}).get("last_success_at") for job in LAG_JOBS]
    known = [success for success in successes if success is not None]
    oldest = min(known) if len(known) == len(successes) else None
    lag_seconds = None if oldest is None else max(0, int((now - oldest).total_seconds()))
    lagging = lag_seconds is None or lag_seconds > settings.SYNC_LAG_ALERT_SECONDS
    return {
        "address": lat.proxy_address,
        "symbol": lat.symbol,
        "chainId": lat.chain_id,
        "status": "lagging" if lagging else OK,
        "lastIndexedBlock": indexed,
        "lagBlocks": None if head is None or indexed is None else max(0, head - indexed),
        "lastSyncedAt": oldest,
        "lagSeconds": lag_seconds,
        "gaps": lat_gaps(lat=lat, feeds=feeds),
    }


# What a LAT's row of /health reads: its identity, and what lat_gaps looks at.
_LAT_FIELDS = (
    "id",
    "proxy_address",
    "symbol",
    "chain_id",
    "base_asset",
    *Lat.OVERRIDE_FIELDS.values(),
    "eigenlayer_from_chain",
    "missing_functions",
    "apy_gaps",
)


def _read_sync_state() -> tuple[list[Lat], list[dict[str, Any]], set[tuple[int, str]]]:
    fields = ("lat_id", "job", "last_block", "last_success_at", "last_error", "last_error_at")
    with transaction.atomic():
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute(f"SET LOCAL statement_timeout = {STATEMENT_TIMEOUT_MS}")
        lats = list(Lat.objects.order_by("chain_id", "proxy_address").only(*_LAT_FIELDS))
        rows = list(SyncStatus.objects.order_by("lat_id", "job").values(*fields))
        feeds = set(PriceFeed.objects.values_list("chain_id", "token_address"))
    return lats, rows, feeds


def _sync_checks() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    lats, rows, feeds = _read_sync_state()
    rows_of: dict[int, list[dict[str, Any]]] = {}
    for row in rows:
        rows_of.setdefault(row["lat_id"], []).append(row)
    chain_rows: dict[int, list[dict[str, Any]]] = {}
    for lat in lats:
        chain_rows.setdefault(lat.chain_id, []).extend(rows_of.get(lat.id, []))
    chains = [_chain_check(chain_id, chain_rows[chain_id]) for chain_id in sorted(chain_rows)]
    heads = {chain["chainId"]: chain["lastHead"] for chain in chains}
    now = timezone.now()
    lat_checks = [
        _lat_check(lat, rows_of.get(lat.id, []), heads[lat.chain_id], now, feeds) for lat in lats
    ]
    return chains, lat_checks


# --- webhooks ------------------------------------------------------------------------------------


def _webhooks_check() -> dict[str, Any]:
    """The dispatcher's lag: deliveries pending, outbox rows not fanned out, and the age of the
    oldest due (`lagging` above WEBHOOK_LAG_ALERT_SECONDS: the dispatcher is down or behind)."""
    with transaction.atomic():
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute(f"SET LOCAL statement_timeout = {STATEMENT_TIMEOUT_MS}")
        lag = queue_lag()
    oldest = int(lag["oldest_seconds"])
    return {
        "status": "lagging" if oldest > settings.WEBHOOK_LAG_ALERT_SECONDS else OK,
        "pendingDeliveries": lag["deliveries"],
        "pendingEvents": lag["outbox"],
        "oldestPendingSeconds": oldest,
    }


# --- the whole -----------------------------------------------------------------------------------


def service_health() -> dict[str, Any]:
    """`{"status", "checks": {"database", "redis"?, "chains", "lats"}}` (module docstring)."""
    started = time.monotonic()
    probe = _start_probe(connections[DEFAULT_DB_ALIAS].settings_dict)
    location = redis_location()
    checks: dict[str, Any] = {}
    if location is not None:
        checks["redis"] = _redis_check(location)  # while the database probe runs
    checks["database"] = _database_check(probe, started)
    if checks["database"]["status"] == DOWN:
        return {
            "status": DOWN,
            "checks": checks | {"chains": None, "lats": None, "webhooks": None},
        }
    checks["chains"], checks["lats"] = _sync_checks()
    checks["webhooks"] = _webhooks_check()
    if replica_aliases():
        checks["replicas"] = replicas_health()
    degraded = (
        checks.get("redis", {}).get("status") == DOWN
        or any(replica["status"] != OK for replica in checks.get("replicas", ()))
        or checks["webhooks"]["status"] != OK
        or any(chain["nodeAnswered"] is False for chain in checks["chains"])
        or any(lat["status"] != OK for lat in checks["lats"])
    )
    return {"status": DEGRADED if degraded else OK, "checks": checks}
