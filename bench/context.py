"""What a section gets (`Context`) and fills in (`SectionResult`), and the plumbing every section
shares: processes, gunicorn, measured and interleaved loads, probes, tables and targets."""

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
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bench import PYTHON, REPO, dataset, load, python
from devchain.anvil import free_port

QUIET_CORES = 0.15  # other processes' cores above which a measurement counts as disturbed
HOST = "127.0.0.1"
NO_LIMIT = "1000000000/s"  # rate limits out of the bench's reach (their counters still run)


@dataclass
class Target:
    description: str
    met: bool
    detail: str


def table(columns: list[str], rows: list[list[str]]) -> list[str]:
    """Aligned lines, the first column to the left, a rule under the header (none without rows)."""
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

    def target(self, description, value, detail, *, at_least=-1e300, at_most=1e300, also=True):
        self.targets.append(Target(description, also and at_least <= value <= at_most, detail))

    def check(self, label: str, result: load.LoadResult, server: Server) -> None:
        if result.errors:
            self.failures.append(
                f"{label}: {result.non200} answers not 200 and {result.socket_errors} socket "
                f"errors out of {result.requests:,} requests; server log:\n{server.log_tail()}"
            )

    def warn_busy(self, usages: dict, disturbed: str) -> None:
        busy = [name for name, cpu in usages.items() if cpu and cpu.other_cores > QUIET_CORES]
        if busy:
            self.notes.append(
                f"WARNING: other processes took > {QUIET_CORES} cores during: {', '.join(busy)}; "
                f"those {disturbed}. Rerun on a quiet machine."
            )


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
    """SIGCONT (a paused process cannot act on SIGTERM), SIGTERM, then SIGKILL to its group."""
    for sig in (signal.SIGCONT, signal.SIGTERM):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, sig)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=timeout)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=5)


class Processes:
    """Processes each in its own process group, logs in a temporary directory; all stopped on
    leaving the `with` block, the logs kept (and said) only when the block failed."""

    def __init__(self, log: Callable[[str], None]) -> None:
        self.log, self.dir, self.procs = log, Path(tempfile.mkdtemp(prefix="lat-bench-")), {}

    def start(self, name: str, cmd: list[str], env: dict[str, str]) -> subprocess.Popen:
        with open(self.dir / f"{name}.log", "ab") as out:
            kw = {"cwd": REPO, "env": env, "stdin": subprocess.DEVNULL, "stderr": subprocess.STDOUT}
            self.procs[name] = subprocess.Popen(cmd, stdout=out, start_new_session=True, **kw)
        return self.procs[name]

    def procfile(self, names, env: dict[str, str]) -> None:
        """The Procfile's processes `names`, as it lists them (web bound to 127.0.0.1)."""
        lines = (REPO / "Procfile").read_text().splitlines()
        commands = dict(line.split(": ", 1) for line in lines if ": " in line)
        for name in names:
            command = commands[name].strip().replace("0.0.0.0", HOST)
            self.start(name, ["/bin/sh", "-c", f"exec {command}"], env)
            self.log(f"bench: {name} pid {self.procs[name].pid}: {command}")

    def tail(self, name: str, lines: int = 30) -> str:
        return "\n".join((self.dir / f"{name}.log").read_text().splitlines()[-lines:])

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
        conn = http.client.HTTPConnection(HOST, self.port, timeout=timeout)
        try:
            conn.request("GET", path, headers={"Host": HOST})
            response = conn.getresponse()
            return response.status, response.read()
        finally:
            conn.close()

    def log_tail(self) -> str:
        return self.procs.tail("gunicorn", 20)


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
        if self.data is None:
            self.data = dataset.prepare(self.db_url, self.env, self.args.deposits, self.log)
        return self.data

    def django(self) -> None:
        if not self._django:
            self.dataset()
            dataset.setup_django(self.db_url, self.env)
            self._django = True

    def db_name(self, section: str) -> str:
        # lat_<section>_bench for lat_bench
        return f"{self.args.db_name.removesuffix('_bench')}_{section}_bench"

    @contextlib.contextmanager
    def server(self, *, threads: int = 0, **extra_env: str):
        """gunicorn on a free port (bench/settings.py: the service plus GET /bench/baseline, on
        the bench database, `extra_env` over it), sync workers or gthread workers of `threads`
        threads; stopped on leaving the block."""
        env = {"LOG_LEVEL": "WARNING", **self.env, "DATABASE_URL": self.db_url}
        env |= {"DJANGO_SETTINGS_MODULE": "bench.settings", "RATE_LIMIT_ANON": NO_LIMIT}
        env |= {"RATE_LIMIT_KEYED": NO_LIMIT, **extra_env}
        port, started, workers = free_port(), time.monotonic(), self.args.workers
        kind = ["gthread", "--threads", str(threads)] if threads else ["sync"]
        cmd = [PYTHON, "-m", "gunicorn", "latsite.wsgi:application", "--bind", f"{HOST}:{port}"]
        cmd += ["--workers", str(workers), "--worker-class", *kind, "--log-level", "warning"]
        with Processes(self.log) as procs:
            server = Server(port, procs.start("gunicorn", [*cmd, "--timeout", "60"], env), procs)
            if not wait_until(lambda: server.get("/health", 2.0)[0] == 200, 60, procs.dead):
                raise RuntimeError(f"gunicorn did not answer /health:\n{procs.tail('gunicorn')}")
            what = f"gthread workers x {threads} threads" if threads else "sync workers"
            self.log(
                f"server: gunicorn on {HOST}:{port}, {workers} {what}, "
                f"ready in {time.monotonic() - started:.1f} s"
            )
            self._server = server
            try:
                yield server
            finally:
                self._server = None

    @contextlib.contextmanager
    def devnet(self, section: str, *, fresh: bool = True, synced: bool = False):
        """anvil with the devnet (stopped on leaving the block) and the section's migrated
        database, recreated when `fresh`, latETH imported and synced when `synced`: (node URL,
        latETH's manifest, database URL)."""
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
        env["LOG_LEVEL"] = "WARNING"
        with tempfile.NamedTemporaryFile("w", suffix=".json") as file:
            json.dump(manifest, file)
            file.flush()
            out = python("-m", module, rpc_url, file.name, *args, env=env)
        return json.loads(out.strip().splitlines()[-1])

    def pids(self) -> dict[str, list[int]]:
        server = load.children_of(self._server.process.pid) if self._server else []
        with dataset.connect(self.db_url, autocommit=True) as conn:
            rows = conn.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
            ).fetchall()
        return {"server": server, "db": [pid for (pid,) in rows]}

    def measure(self, urls: list[str], *, warmup: float, pids=None) -> list[load.LoadResult]:
        """The URLs loaded together, the connections split between them, after a quiet wait and
        `warmup` s of discarded load; each result's `cpu` is the whole run's. `pids`: more of
        the bench's processes."""
        connections = max(1, self.args.connections // len(urls))

        def groups() -> dict[str, list[int]]:
            return {**self.pids(), **(pids or {})}

        if (wait := self.args.quiet_wait) > 0:
            other = load.wait_quiet(groups, max_other_cores=QUIET_CORES, timeout=wait)
            if other >= QUIET_CORES:
                self.log(f"load: others still use {other:.2f} cores after {wait:g} s; measuring")
        if warmup > 0:
            load.run(urls, duration=warmup, connections=connections)
        with load.CpuMonitor(groups) as monitor:
            results = load.run(urls, duration=self.args.duration, connections=connections)
        for result in results:
            result.cpu = monitor.usage
        return results

    def interleave(self, sides, *, rounds: int, duration: float, connections=0, warmup=0.0):
        """The (URL, POST body) sides, each after `warmup` s of discarded load, loaded in turn,
        `rounds` rounds of `duration` s, the order alternating (a b, b a, ...) so that every
        side sees the same drift of the machine: each side's rounds merged."""
        settings = {"duration": duration, "connections": connections or self.args.connections}
        for url, body in sides if warmup > 0 else ():
            load.run([url], body=body, **{**settings, "duration": warmup})
        runs: list[list[load.LoadResult]] = [[] for _ in sides]
        for k in range(rounds):
            for i in range(len(sides)) if k % 2 == 0 else reversed(range(len(sides))):
                runs[i] += load.run([sides[i][0]], body=sides[i][1], **settings)
        return [load.merge(one) for one in runs]
