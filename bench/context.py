"""What a section gets (`Context`) and fills in (`SectionResult`), and the plumbing every section
shares: processes started and stopped, gunicorn, measured and interleaved loads, probes in a
process of their own, tables and targets."""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from bench import PYTHON, REPO, dataset, load, python
from devchain.anvil import free_port

QUIET_CORES = 0.15  # other processes' cores above which a measurement counts as disturbed
HOST = "127.0.0.1"


@dataclass
class Target:
    description: str
    met: bool
    detail: str


def table(columns: list[str], rows: list[list[str]]) -> list[str]:
    """Aligned lines: the first column to the left, the others to the right, a rule under the
    header (none without rows)."""
    if not rows:
        return []
    widths = [max(len(str(row[i])) for row in [columns, *rows]) for i in range(len(columns))]
    lines = [
        "  ".join(str(c).rjust(w) if i else str(c).ljust(w) for i, (c, w) in enumerate(cells))
        for cells in (zip(row, widths, strict=True) for row in [columns, *rows])
    ]
    lines = [line.rstrip() for line in lines]
    return [lines[0], "  ".join("-" * w for w in widths), *lines[1:]]


@dataclass
class SectionResult:
    name: str
    title: str
    columns: list[str] = field(default_factory=list)
    rows: list[list[str]] = field(default_factory=list)
    targets: list[Target] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)  # any entry makes the run exit 1

    def target(self, description: str, value: float, detail: str, *, at_least: float = -1e300,
               at_most: float = 1e300, also: bool = True) -> None:  # fmt: skip
        """A target met when `at_least` <= `value` <= `at_most` (and `also`)."""
        self.targets.append(Target(description, also and at_least <= value <= at_most, detail))

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


# --- processes --------------------------------------------------------------------------------


def wait_until(ready: Callable[[], bool], timeout: float, dead=lambda: None, every=0.2) -> bool:
    """Poll `ready` (an OSError counts as not yet) until it holds: False after `timeout` s; a
    RuntimeError as soon as `dead()` says why the wait is vain."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if problem := dead():
            raise RuntimeError(problem)
        with contextlib.suppress(OSError):
            if ready():
                return True
        time.sleep(every)
    return False


def stop(process: subprocess.Popen, timeout: float = 20.0) -> None:
    """SIGCONT (a paused process cannot act on SIGTERM) and SIGTERM to its process group, SIGKILL
    to the group after `timeout` s and to any child left behind."""

    def group(sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, sig)

    group(signal.SIGCONT)
    group(signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=timeout)
    group(signal.SIGKILL)
    process.wait(timeout=5)


class Processes:
    """Processes each in its own process group, with its log in a temporary directory; all
    stopped on leaving the `with` block, the logs kept (and said) only when the block failed."""

    def __init__(self, log: Callable[[str], None]) -> None:
        self.log, self.dir, self.procs = log, Path(tempfile.mkdtemp(prefix="lat-bench-")), {}

    def start(self, name: str, cmd: list[str], env: dict[str, str]) -> subprocess.Popen:
        with open(self.dir / f"{name}.log", "ab") as out:
            self.procs[name] = subprocess.Popen(
                cmd, cwd=REPO, env=env, stdin=subprocess.DEVNULL, stdout=out,
                stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        return self.procs[name]

    def tail(self, name: str, lines: int = 30) -> str:
        text = (self.dir / f"{name}.log").read_text(errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    def dead(self) -> str | None:
        """Which process exited, with the end of its log, or None."""
        for name, process in self.procs.items():
            if process.poll() is not None:
                return f"{name} exited with {process.returncode}:\n{self.tail(name)}"
        return None

    def __enter__(self) -> Processes:
        return self

    def __exit__(self, kind, *_) -> None:
        for process in self.procs.values():
            stop(process)
        if kind is None:
            shutil.rmtree(self.dir, ignore_errors=True)
        else:
            self.log(f"bench: stopped {', '.join(self.procs)}; their logs are in {self.dir}")


@dataclass
class Server:
    port: int
    process: subprocess.Popen
    procs: Processes

    def url(self, path: str) -> str:
        return f"http://{HOST}:{self.port}{path}"

    def get(self, path: str, timeout: float = 10.0) -> tuple[int, bytes]:
        """One GET: (status, body)."""
        conn = http.client.HTTPConnection(HOST, self.port, timeout=timeout)
        try:
            conn.request("GET", path, headers={"Host": HOST})
            response = conn.getresponse()
            return response.status, response.read()
        finally:
            conn.close()

    def log_tail(self) -> str:
        return self.procs.tail("gunicorn", 20)


# --- the context ------------------------------------------------------------------------------


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

    def db_name(self, section: str) -> str:
        """A section's own database beside the bench's: lat_<section>_bench for lat_bench."""
        return f"{self.args.db_name.removesuffix('_bench')}_{section}_bench"

    @contextlib.contextmanager
    def server(self, *, threads: int = 0, **extra_env: str) -> Iterator[Server]:
        """gunicorn on 127.0.0.1 and a free port (bench/settings.py: the service plus GET
        /bench/baseline, on the bench database, `extra_env` over its environment), sync workers
        or gthread workers of `threads` threads, no access log; stopped on leaving the block."""
        env = {
            "LOG_LEVEL": "WARNING", **self.env, "DATABASE_URL": self.db_url,
            "DJANGO_SETTINGS_MODULE": "bench.settings",
            # The throttle's Redis counters stay in every request's cost, but the one client
            # the bench is must never be answered 429.
            "RATE_LIMIT_ANON": "1000000000/s", "RATE_LIMIT_KEYED": "1000000000/s", **extra_env,
        }  # fmt: skip
        port, started, workers = free_port(), time.monotonic(), self.args.workers
        kind = ["gthread", "--threads", str(threads)] if threads else ["sync"]
        cmd = [PYTHON, "-m", "gunicorn", "latsite.wsgi:application", "--bind", f"{HOST}:{port}"]
        cmd += ["--workers", str(workers), "--worker-class", *kind, "--log-level", "warning"]
        with Processes(self.log) as procs:
            self._server = Server(
                port, procs.start("gunicorn", [*cmd, "--timeout", "60"], env), procs
            )
            if not wait_until(lambda: self._server.get("/health", 2.0)[0] == 200, 60, procs.dead):
                raise RuntimeError(
                    f"gunicorn did not answer /health in 60 s:\n{procs.tail('gunicorn')}"
                )
            what = f"gthread workers x {threads} threads" if threads else "sync workers"
            self.log(
                f"server: gunicorn pid {self._server.process.pid} on {HOST}:{port}, {workers} "
                f"{what}, ready in {time.monotonic() - started:.1f} s"
            )
            try:
                yield self._server
            finally:
                self._server = None

    @contextlib.contextmanager
    def devnet(
        self, section: str, *, fresh: bool = True, synced: bool = False
    ) -> Iterator[tuple[str, dict, str]]:
        """anvil with the devnet deployed (stopped on leaving the block) and the section's
        migrated database (`db_name`), recreated unless `fresh` is false, with latETH imported
        and synced when `synced`: (node URL, latETH's manifest, database URL)."""
        from devchain.anvil import start_anvil
        from devchain.devnet import deploy_devnet, write_manifests

        with start_anvil() as node, tempfile.TemporaryDirectory(prefix="lat-bench-") as tmp:
            manifest = next(m for m in deploy_devnet(node.url) if m["symbol"] == "latETH")
            db_url = dataset.with_database(self.db_url, self.db_name(section))
            dataset.create_database(db_url, recreate=fresh)
            env = {**self.env, "RPC_URL": node.url}
            dataset.manage(env, db_url, "migrate", "--noinput")
            if synced:
                dataset.manage(env, db_url, "lat_import", str(write_manifests([manifest], tmp)[0]))
                dataset.manage(env, db_url, "lat_sync", "--no-progress")
            yield node.url, manifest, db_url

    def probe(self, module: str, rpc_url: str, manifest: dict, db_url: str, *args: str) -> dict:
        """`python -m <module> RPC_URL MANIFEST_FILE <args>` in a process of its own, Django on
        `db_url`: the JSON of its last line of output."""
        env = {**self.env, "DATABASE_URL": db_url, "RPC_URL": rpc_url, "RPC_TIMEOUT": "300"}
        with tempfile.NamedTemporaryFile("w", suffix=".json") as file:
            json.dump(manifest, file)
            file.flush()
            out = python(
                "-m", module, rpc_url, file.name, *args, env={**env, "LOG_LEVEL": "WARNING"}
            )
        return json.loads(out.strip().splitlines()[-1])

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
            "duration": args.duration, "connections": args.connections,
            "max_requests": args.max_requests, "tool": args.loadgen, "threads": args.threads,
            **overrides,
        }  # fmt: skip

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

        if (wait := self.args.quiet_wait) > 0:
            other = load.wait_quiet(groups, max_other_cores=QUIET_CORES, timeout=wait)
            if other >= QUIET_CORES:
                self.log(f"load: others still use {other:.2f} cores after {wait:g} s; measuring")
        if warmup > 0:
            load.run(urls, **{**settings, "duration": warmup})
        with load.CpuMonitor(groups) as monitor:
            results = load.run(urls, **settings)
        for result in results:
            result.cpu = monitor.usage
        return results

    def interleave(
        self, sides: list[tuple[str, bytes | None]], *, rounds: int, warmup=0.0, **settings
    ) -> list[load.LoadResult]:
        """The (URL, POST body) sides, each after `warmup` s of discarded load, loaded in turn,
        `rounds` rounds of `duration` s each, the order alternating (a b, b a, ...) so that
        every side sees the same drift of the machine's capacity: each side's rounds merged."""
        settings = self.settings(**settings)
        for url, body in sides if warmup > 0 else ():
            load.run([url], body=body, **{**settings, "duration": warmup, "max_requests": 0})
        settings["max_requests"] //= rounds
        runs: list[list[load.LoadResult]] = [[] for _ in sides]
        for k in range(rounds):
            for i in range(len(sides)) if k % 2 == 0 else reversed(range(len(sides))):
                runs[i] += load.run([sides[i][0]], body=sides[i][1], **settings)
        return [load.merge(one) for one in runs]
