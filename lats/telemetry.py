"""The indexing lag as Prometheus gauges, read from the sync status rows at scrape time.

Every process (each gunicorn worker, whichever answers the scrape) reads the same rows, so
the gauges are the same whichever process Prometheus reaches, and no process has to remember
anything between scrapes.

- `lat_chain_head_block{chain}`: the highest block any refresh job has recorded on that chain
  (the newest head the service has seen; the node is not asked at scrape time).
- `lat_sync_lag_blocks{chain,lat,symbol,sync}`: that head minus the block the job last recorded
  for the LAT (the deposit indexer trails by CHAIN_CONFIRMATIONS by design).
- `lat_sync_last_success_timestamp_seconds{...}`: when the job last succeeded (Unix time).
- `lat_sync_lag_seconds{...}`: seconds since then, at scrape time.
- `lat_sync_consecutive_failures{...}`: failures since that success.

A job that never succeeded has no lag or last-success sample (its failures gauge still shows).

`lat_sync_status_up` is 1 when the rows could be read, 0 when the database could not be reached
(then the gauges above are absent, and the rest of the scrape is still served).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime

from django.db import DatabaseError
from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from lats.models import SyncStatus

# `sync`: the sync status job (state, deposits, metadata, snapshot); not `job`, which
# Prometheus itself sets on every series it scrapes.
logger = logging.getLogger(__name__)

LABELS = ["chain", "lat", "symbol", "sync"]


@dataclass(frozen=True)
class SyncRow:
    chain: int
    lat: str
    symbol: str
    job: str
    last_block: int | None
    last_success_at: datetime | None
    consecutive_failures: int

    @property
    def labels(self) -> list[str]:
        return [str(self.chain), self.lat, self.symbol, self.job]


def sync_rows() -> list[SyncRow]:
    """Every sync status row with its LAT's chain, address and symbol (one query)."""
    rows = SyncStatus.objects.order_by("lat_id", "job").values_list(
        "lat__chain_id",
        "lat__proxy_address",
        "lat__symbol",
        "job",
        "last_block",
        "last_success_at",
        "consecutive_failures",
    )
    return [SyncRow(*row) for row in rows]


def chain_heads(rows: list[SyncRow]) -> dict[int, int]:
    """The highest recorded block per chain."""
    heads: dict[int, int] = {}
    for row in rows:
        if row.last_block is not None:
            heads[row.chain] = max(heads.get(row.chain, row.last_block), row.last_block)
    return heads


class SyncStatusCollector(Collector):
    """A prometheus_client collector of the gauges above, computed on every `collect()`."""

    def collect(self) -> Iterator[Metric]:
        try:
            rows = sync_rows()
        except DatabaseError:
            logger.exception("The sync status rows could not be read for the metrics")
            yield _up(0)
            return
        yield _up(1)
        now = timezone.now()
        heads = chain_heads(rows)
        head = GaugeMetricFamily(
            "lat_chain_head_block",
            "The highest block a refresh job recorded on the chain (the newest head seen).",
            labels=["chain"],
        )
        for chain, number in sorted(heads.items()):
            head.add_metric([str(chain)], number)
        lag_blocks = _gauge(
            "lat_sync_lag_blocks",
            "Blocks between the chain's head seen and the block the job last recorded for the LAT.",
        )
        last_success = _gauge(
            "lat_sync_last_success_timestamp_seconds",
            "When the job last succeeded for the LAT (Unix time).",
        )
        lag_seconds = _gauge(
            "lat_sync_lag_seconds", "Seconds since the job last succeeded for the LAT."
        )
        failures = _gauge(
            "lat_sync_consecutive_failures",
            "Failures of the job for the LAT since its last success.",
        )
        for row in rows:
            failures.add_metric(row.labels, row.consecutive_failures)
            if row.last_block is not None:
                lag_blocks.add_metric(row.labels, heads[row.chain] - row.last_block)
            if row.last_success_at is not None:
                last_success.add_metric(row.labels, row.last_success_at.timestamp())
                lag_seconds.add_metric(row.labels, (now - row.last_success_at).total_seconds())
        yield from (head, lag_blocks, lag_seconds, last_success, failures)


def _gauge(name: str, documentation: str) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, labels=LABELS)


def _up(value: int) -> GaugeMetricFamily:
    return GaugeMetricFamily(
        "lat_sync_status_up",
        "1 when the sync status rows could be read at this scrape, 0 when the database failed.",
        value=value,
    )
