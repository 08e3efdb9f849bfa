"""What every bench section gets: the settings, the bench database, the server and the load.

A section is a function `run(ctx: Context) -> SectionResult`; it asks the context for what it
needs (`ctx.dataset()`, `ctx.server()`, `ctx.load(...)`, `ctx.django()`), each set up once.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import psycopg

from bench import http_load, server
from bench.config import database_name, libpq_url
from bench.cpu import CpuMonitor, children_of, wait_quiet
from bench.dataset import Dataset, prepare

# Other processes' CPU (cores) above which a measurement counts as disturbed.
QUIET_CORES = 0.15


@dataclass
class Target:
    description: str
    met: bool
    detail: str


@dataclass
class SectionResult:
    name: str
    title: str
    columns: list[str] = field(default_factory=list)
    rows: list[list[str]] = field(default_factory=list)
    targets: list[Target] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)  # any entry makes the run exit non-zero


@dataclass
class Context:
    args: argparse.Namespace
    env: dict[str, str]  # the caller's environment with TEST_ENV's defaults
    db_url: str  # the bench database
    log: Callable[[str], None] = print
    _dataset: Dataset | None = None
    _django: bool = False
    _server: server.Server | None = None

    # --- database ---

    def dataset(self) -> Dataset:
        """The seeded bench database (seeded on first use if it does not hold the data set)."""
        if self._dataset is None:
            self._dataset = prepare(
                self.db_url,
                self.env,
                deposits=self.args.deposits,
                reseed=self.args.reseed,
                log=self.log,
            )
        return self._dataset

    def django(self) -> None:
        """Django set up in this process, on the bench database."""
        if not self._django:
            from bench.dataset import _django

            self.dataset()
            _django(self.db_url)
            self._django = True

    # --- server and load ---

    def server_env(self, **extra: str) -> dict[str, str]:
        env = {
            **self.env,
            "DATABASE_URL": self.db_url,
            "DJANGO_SETTINGS_MODULE": "bench.settings",  # the service plus GET /bench/baseline
            # The per-client limits stay in the stack (their Redis counters are part of every
            # request's cost) but must not answer 429 to the one client the bench is.
            "RATE_LIMIT_ANON": "1000000000/s",
            "RATE_LIMIT_KEYED": "1000000000/s",
        }
        env.setdefault("LOG_LEVEL", "WARNING")
        env.update(extra)
        return env

    @contextlib.contextmanager
    def server(self, *, workers: int | None = None, **extra_env: str) -> Iterator[server.Server]:
        """gunicorn on the bench database; stopped on leaving the block."""
        with server.gunicorn(
            self.server_env(**extra_env),
            workers=workers or self.args.workers,
            log=self.log,
        ) as running:
            self._server = running
            try:
                yield running
            finally:
                self._server = None

    def bench_pids(self) -> dict[str, list[int]]:
        """The server's processes, and the PostgreSQL backends serving the bench database."""
        pids = children_of(self._server.process.pid) if self._server else []
        try:
            with psycopg.connect(libpq_url(self.db_url), autocommit=True) as conn:
                rows = conn.execute(
                    "SELECT pid FROM pg_stat_activity WHERE datname = %s",
                    [database_name(self.db_url)],
                ).fetchall()
        except psycopg.Error:
            rows = []
        return {"server": pids, "db": [pid for (pid,) in rows]}

    def _settings(self, overrides: dict) -> dict:
        settings = {
            "duration": self.args.duration,
            "connections": self.args.connections,
            "max_requests": self.args.max_requests,
            "tool": self.args.loadgen,
            "threads": self.args.threads,
        }
        settings.update(overrides)
        return settings

    def load(self, url: str, *, warmup: bool = True, **overrides) -> http_load.LoadResult:
        """Warm-up (discarded), then the measured run, with the run's settings."""
        settings = self._settings(overrides)
        self._wait_quiet()
        if warmup and self.args.warmup > 0:
            http_load.run(url, **{**settings, "duration": self.args.warmup})
        with CpuMonitor(self.bench_pids) as monitor:
            result = http_load.run(url, **settings)
        result.cpu = monitor.usage
        return result

    def load_together(self, urls: list[str], **overrides) -> list[http_load.LoadResult]:
        """Several URLs loaded at the same time, the connections split between them (no
        warm-up: load each URL with `load` first). Each result's `cpu` is the whole run's."""
        settings = self._settings(overrides)
        settings["connections"] = max(1, settings["connections"] // len(urls))
        if settings["max_requests"]:
            settings["max_requests"] = max(1, settings["max_requests"] // len(urls))
        self._wait_quiet()
        with CpuMonitor(self.bench_pids) as monitor:
            results = http_load.run_together(urls, **settings)
        for result in results:
            result.cpu = monitor.usage
        return results

    def _wait_quiet(self) -> None:
        if self.args.quiet_wait > 0:
            other = wait_quiet(
                self.bench_pids, max_other_cores=QUIET_CORES, timeout=self.args.quiet_wait
            )
            if other >= QUIET_CORES:
                self.log(
                    f"load: other processes still use {other:.2f} cores after waiting "
                    f"{self.args.quiet_wait:g} s; measuring anyway"
                )


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)
