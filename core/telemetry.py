"""The service's own Prometheus metrics, and the exposition served at /internal/metrics.

The counters and histograms here are process-local: each gunicorn worker and each Celery
worker process counts what it did. With PROMETHEUS_MULTIPROC_DIR set (README, "Monitoring"),
prometheus_client keeps them in files in that directory and the exposition adds up every
process's files; without it, a process exposes only its own (fine for one process, `runserver`
and tests). What every process must report alike, the indexing lag, is not counted here but
read from the database at scrape time by the collectors the caller passes to `exposition`
(lats/telemetry.py).

No label ever carries a node's URL (it holds API keys): chains are named by chain id.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from prometheus_client import (
    REGISTRY,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
    multiprocess,
)
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
# The classic text format (names and labels are plain ASCII): every Prometheus version reads it.
CONTENT_TYPE = CONTENT_TYPE_PLAIN_0_0_4

# --- chain gateway (chain/transport.py) --------------------------------------------------

RPC_REQUESTS = Counter(
    "lat_rpc_requests",
    "JSON-RPC requests sent to a node (each request of a batch counts), by chain id and method.",
    ["chain", "method"],
)
RPC_ERRORS = Counter(
    "lat_rpc_errors",
    "JSON-RPC requests that failed, by chain id, method and kind: timeout, unreachable (no "
    "answer), invalid (not JSON-RPC), refused (a JSON-RPC error), reverted (the call reverted).",
    ["chain", "method", "kind"],
)
RPC_DURATION = Histogram(
    "lat_rpc_duration_seconds",
    "Round trips to a node, by chain id and method (`batch` for a JSON-RPC batch).",
    ["chain", "method"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)
UNKNOWN_CHAIN = "unknown"  # a gateway built for a URL without a chain id (tooling, tests)

# --- jobs (sync/jobs.py) ---------------------------------------------------------------------

# The job is labelled `task` (its Celery task name): Prometheus sets `job` on every series.
JOB_RUNS = Counter(
    "lat_job_runs",
    "Runs of a per-LAT refresh job, by task name and status: done, skipped, missing, lagging, "
    "failed, unavailable (retried), timeout (soft time limit), error (unexpected).",
    ["task", "status"],
)
JOB_FAILURES = Counter(
    "lat_job_failures",
    "Runs of a per-LAT refresh job that did not do their work, by task name and status "
    "(lagging, failed, unavailable, timeout, error).",
    ["task", "status"],
)
JOB_DURATION = Histogram(
    "lat_job_duration_seconds",
    "Duration of per-LAT refresh job runs, by task name, whatever their outcome.",
    ["task"],
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600),
)
JOB_FAILURE_STATUSES = frozenset({"lagging", "failed", "unavailable", "timeout", "error"})

# --- rate limits (core/api/throttling.py) -----------------------------------------------------

RATE_LIMIT_REJECTIONS = Counter(
    "lat_rate_limit_rejections",
    "Requests refused with 429, by limit: anon, keyed, simulate, bad-key.",
    ["scope"],
)


# --- recording ----------------------------------------------------------------------------------


class RpcCall:
    """Times one round trip to a node and counts its requests and failures.

    `methods` are the JSON-RPC methods sent (one, or a batch's); `chain` the chain id label."""

    def __init__(self, chain: str, methods: Sequence[str], *, batch: bool = False) -> None:
        self.chain = chain
        self.methods = methods
        self.timed = "batch" if batch else methods[0]
        self.started = 0.0

    def __enter__(self) -> RpcCall:
        for method in self.methods:
            RPC_REQUESTS.labels(self.chain, method).inc()
        self.started = time.perf_counter()
        return self

    def __exit__(self, *exc_info: Any) -> None:
        RPC_DURATION.labels(self.chain, self.timed).observe(time.perf_counter() - self.started)

    def failed(self, kind: str, methods: Iterable[str] | None = None) -> None:
        for method in self.methods if methods is None else methods:
            RPC_ERRORS.labels(self.chain, method, kind).inc()


def job_finished(job: str, status: str, seconds: float) -> None:
    JOB_RUNS.labels(job, status).inc()
    if status in JOB_FAILURE_STATUSES:
        JOB_FAILURES.labels(job, status).inc()
    JOB_DURATION.labels(job).observe(seconds)


def rate_limit_rejected(scope: str) -> None:
    RATE_LIMIT_REJECTIONS.labels(scope).inc()


# --- database reads (core/replicas.py) ----------------------------------------------------------

DATABASE_READS = Counter(
    "lat_database_reads",
    "Read endpoint requests by the database that answered them: `primary` or a replica's "
    "alias (replica1, ...). A stored document found in the cache is answered by none.",
    ["target"],
)


def database_read(target: str) -> None:
    DATABASE_READS.labels(target).inc()


# --- exposition ---------------------------------------------------------------------------------


class _Scrape(Collector):
    """What one scrape exposes: the process-local metrics (every process's, in multiprocess
    mode) and the given collectors, computed now; nothing is registered globally."""

    def __init__(self, collectors: Sequence[Collector]) -> None:
        self.collectors = collectors

    def collect(self) -> Iterator[Metric]:
        directory = os.environ.get(MULTIPROC_ENV)
        if directory:
            merged = CollectorRegistry()
            multiprocess.MultiProcessCollector(merged, path=directory)
            yield from merged.collect()
        else:
            yield from REGISTRY.collect()
        for collector in self.collectors:
            yield from collector.collect()


def exposition(collectors: Sequence[Collector] = ()) -> bytes:
    """The text exposition format of every metric, plus `collectors`' (computed now)."""
    return generate_latest(_Scrape(collectors))
