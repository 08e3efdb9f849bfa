"""What a section gets (`Context`: the options, the bench database, the server, the load) and
what it fills in (`SectionResult`)."""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from bench import dataset, load
from bench.server import Server, gunicorn

QUIET_CORES = 0.15  # other processes' cores above which a measurement counts as disturbed


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
    failures: list[str] = field(default_factory=list)  # any entry makes the run exit 1

    def check(self, label: str, result: load.LoadResult, server: Server) -> None:
        """A failure line if any request of `result` failed."""
        if result.errors:
            self.failures.append(
                f"{label}: {result.non200} answers not 200 and {result.socket_errors} socket "
                f"errors out of {result.requests:,} requests; server log:\n{server.log_tail()}"
            )

    def warn_busy(self, usages: dict[str, load.CpuUsage | None], disturbed: str) -> None:
        busy = [name for name, cpu in usages.items() if cpu and cpu.other_cores > QUIET_CORES]
        if busy:
            self.notes.append(
                f"WARNING: other processes took > {QUIET_CORES} cores during: {', '.join(busy)}; "
                f"those {disturbed}. Rerun on a quiet machine."
            )


@dataclass
class Context:
    args: argparse.Namespace
    env: dict[str, str]  # the caller's environment with TEST_ENV's defaults
    db_url: str  # the bench database
    log: Callable[[str], None]
    data: dataset.Dataset | None = None  # the seeded database, once `dataset()` made it
    _django: bool = False
    _server: Server | None = None

    def dataset(self) -> dataset.Dataset:
        """The seeded bench database (seeded on first use)."""
        if self.data is None:
            args = self.args
            self.data = dataset.prepare(
                self.db_url, self.env, deposits=args.deposits, reseed=args.reseed, log=self.log
            )
        return self.data

    def django(self) -> None:
        """Django set up in this process, on the bench database."""
        if not self._django:
            self.dataset()
            dataset.setup_django(self.db_url, self.env)
            self._django = True

    @contextlib.contextmanager
    def server(self, *, threads: int = 0, **extra_env: str) -> Iterator[Server]:
        """gunicorn (bench/settings.py: the service plus GET /bench/baseline) on the bench
        database, `extra_env` over its environment; stopped on leaving the block."""
        env = {
            "LOG_LEVEL": "WARNING",
            **self.env,
            "DATABASE_URL": self.db_url,
            "DJANGO_SETTINGS_MODULE": "bench.settings",
            # The throttle's Redis counters stay in every request's cost, but the one client
            # the bench is must never be answered 429.
            "RATE_LIMIT_ANON": "1000000000/s",
            "RATE_LIMIT_KEYED": "1000000000/s",
            **extra_env,
        }
        with gunicorn(env, workers=self.args.workers, threads=threads, log=self.log) as running:
            self._server = running
            try:
                yield running
            finally:
                self._server = None

    @contextlib.contextmanager
    def devnet(self, db_name: str, *, fresh: bool = True) -> Iterator[tuple[str, dict, str]]:
        """anvil with the devnet deployed (stopped on leaving the block) and a migrated
        database `db_name` on the bench's server, recreated unless `fresh` is false: (node URL,
        latETH's manifest, database URL)."""
        from devchain.anvil import start_anvil
        from devchain.devnet import deploy_devnet

        with start_anvil() as node:
            manifest = next(m for m in deploy_devnet(node.url) if m["symbol"] == "latETH")
            db_url = dataset.with_database(self.db_url, db_name)
            dataset.create_database(db_url, recreate=fresh)
            env = {**self.env, "RPC_URL": node.url}
            dataset.manage(env, db_url, "migrate", "--noinput", "-v", "0")
            yield node.url, manifest, db_url

    def pids(self) -> dict[str, list[int]]:
        """The server's processes, and the PostgreSQL backends serving the bench database."""
        server = load.children_of(self._server.process.pid) if self._server else []
        with dataset.connect(self.db_url, autocommit=True) as conn:
            rows = conn.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
            ).fetchall()
        return {"server": server, "db": [pid for (pid,) in rows]}

    def settings(self, **overrides) -> dict:
        """The command line's load settings, `overrides` over them."""
        args = self.args
        return {
            "duration": args.duration,
            "connections": args.connections,
            "max_requests": args.max_requests,
            "tool": args.loadgen,
            "threads": args.threads,
            **overrides,
        }

    def measure(
        self, urls: list[str], *, warmup: float, pids: dict[str, list[int]] | None = None
    ) -> list[load.LoadResult]:
        """The URLs loaded together, the connections split between them, after a quiet wait
        and `warmup` s of discarded load. Each result's `cpu` is the whole run's; `pids` are
        more of the bench's processes."""
        n, capped = len(urls), self.args.max_requests
        settings = self.settings(
            connections=max(1, self.args.connections // n),
            max_requests=max(1, capped // n) if capped else 0,
        )

        def groups() -> dict[str, list[int]]:
            return {**self.pids(), **(pids or {})}

        if self.args.quiet_wait > 0:
            wait = self.args.quiet_wait
            other = load.wait_quiet(groups, max_other_cores=QUIET_CORES, timeout=wait)
            if other >= QUIET_CORES:
                self.log(
                    f"load: other processes still use {other:.2f} cores after waiting "
                    f"{wait:g} s; measuring anyway"
                )
        if warmup > 0:
            load.run(urls, **{**settings, "duration": warmup})
        with load.CpuMonitor(groups) as monitor:
            results = load.run(urls, **settings)
        for result in results:
            result.cpu = monitor.usage
        return results
