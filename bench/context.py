"""What a section gets (`Context`) and fills in (`SectionResult`), and the plumbing sections share:
processes, gunicorn, anvil, probes, measured and interleaved loads, tables and targets."""

from __future__ import annotations

import argparse
import contextlib
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

import requests

from bench import PYTHON, REPO, dataset, load, python
from devchain.anvil import free_port

QUIET_CORES = 0.15  # other processes' cores above which a figure is disturbed
HOST = "127.0.0.1"
NO_LIMIT = "1000000000/s"  # rate limits out of the bench's reach (their counters still run)


def table(columns: list[str], rows: list[list[str]]) -> list[str]:
    """Aligned lines, the first column to the left, a rule under the header (none without rows)."""
    widths = [max(len(str(row[i])) for row in [columns, *rows]) for i in range(len(columns))]
    lines = [
        "  ".join(str(c).rjust(w) if i else str(c).ljust(w) for i, (c, w) in enumerate(cells))
        for cells in (zip(row, widths, strict=True) for row in [columns, *rows])
    ]
    rule = "  ".join("-" * w for w in widths)
    return [line.rstrip() for line in [lines[0], rule, *lines[1:]]] if rows else []


@dataclass
class SectionResult:
    name: str
    title: str
    columns: list[str] = field(default_factory=list)
    rows: list[list[str]] = field(default_factory=list)
    targets: list[str] = field(default_factory=list)
    missed: int = 0
    notes: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)  # any entry makes the run exit 1

    def target(self, description, value, detail, *, at_least=-1e300, at_most=1e300, also=True):
        met = also and at_least <= value <= at_most
        self.missed += not met
        self.targets.append(f"  [{'MET   ' if met else 'MISSED'}] {description}: {detail}")

    def check(self, label: str, result: load.LoadResult, server: Server) -> None:
        if result.errors:
            log = server.procs.tail("gunicorn", 20)
            self.failures.append(f"{label}: {result.errors} errors; server log:\n{log}")

    def warn_busy(self, usages: dict, disturbed: str) -> None:
        if busy := [k for k, cpu in usages.items() if cpu and cpu.other_cores > QUIET_CORES]:
            self.notes.append(
                f"WARNING: other processes took > {QUIET_CORES} cores during: {', '.join(busy)}; "
                f"those {disturbed}. Rerun on a quiet machine."
            )

    def __str__(self) -> str:
        lines = [f"== {self.name}: {self.title} ==", *table(self.columns, self.rows)]
        lines += ["", "Targets:", *self.targets] if self.targets else []
        return "\n".join([*lines, *self.notes, *(f"  FAILED: {f}" for f in self.failures)])


def wait_until(ready: Callable[[], bool], timeout: float, dead=lambda: None, every=0.2) -> bool:
    """Poll `ready` (an OSError is a no) until it holds, False after `timeout` s; a RuntimeError
    as soon as `dead()` says why the wait is vain."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if problem := dead():
            raise RuntimeError(problem)
        with contextlib.suppress(OSError):
            if ready():
                return True
        time.sleep(every)
    return False


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

    def tail(self, name: str, lines: int = 30) -> str:
        return "\n".join((self.dir / f"{name}.log").read_text().splitlines()[-lines:])

    def dead(self) -> str | None:
        for name, process in self.procs.items():
            if process.poll() is not None:
                return f"{name} exited with {process.returncode}:\n{self.tail(name)}"
        return None

    def stop(self, name: str) -> None:
        """SIGCONT (a paused process cannot act on SIGTERM), SIGTERM, SIGKILL after 20 s."""
        process = self.procs[name]
        for sig, wait in ((signal.SIGCONT, 0), (signal.SIGTERM, 20), (signal.SIGKILL, None)):
            with contextlib.suppress(ProcessLookupError, subprocess.TimeoutExpired):
                os.killpg(process.pid, sig)
                process.wait(timeout=wait)
        process.wait()

    def __enter__(self) -> Processes:
        return self

    def __exit__(self, kind, *_) -> None:
        for name in self.procs:
            self.stop(name)
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


@dataclass
class Context:
    args: argparse.Namespace
    env: dict[str, str]  # the caller's environment
    db_url: str  # the bench database
    log: Callable[[str], None]
    seeded: float | bool | None = False  # seconds seeding took, None: reused, False: not used
    _server: Server | None = None

    def dataset(self) -> None:
        if self.seeded is False:
            self.seeded = dataset.prepare(self.db_url, self.env, self.args.deposits, self.log)

    def django(self) -> None:
        """Django set up in this process on the bench database (it reads os.environ)."""
        self.dataset()
        os.environ.update({**self.env, "DATABASE_URL": self.db_url})
        import django

        django.setup()

    def db_name(self, section: str) -> str:  # lat_<section>_bench for lat_bench
        return f"{self.args.db_name.removesuffix('_bench')}_{section}_bench"

    @contextlib.contextmanager
    def server(self, *, threads: int = 0, **extra_env: str):
        """gunicorn on a free port (bench/settings.py: the service plus GET /bench/baseline) on
        the bench database, `extra_env` over it; sync workers, or gthread of `threads` threads."""
        env = {"LOG_LEVEL": "WARNING", **self.env, "DATABASE_URL": self.db_url}
        env |= {"DJANGO_SETTINGS_MODULE": "bench.settings", "RATE_LIMIT_ANON": NO_LIMIT}
        env |= {"RATE_LIMIT_KEYED": NO_LIMIT, **extra_env}
        port, kind = free_port(), ["gthread", "--threads", str(threads)] if threads else ["sync"]
        cmd = [PYTHON, "-m", "gunicorn", "latsite.wsgi:application", "--bind", f"{HOST}:{port}"]
        cmd += ["--workers", str(self.args.workers), "--worker-class", *kind, "--timeout", "60"]
        with Processes(self.log) as procs:
            server = Server(
                port, procs.start("gunicorn", [*cmd, "--log-level", "warning"], env), procs
            )

            def health() -> bool:
                return requests.get(server.url("/health"), timeout=2).status_code == 200

            if not wait_until(health, 60, procs.dead):
                raise RuntimeError(f"gunicorn did not answer /health:\n{procs.tail('gunicorn')}")
            self._server = server
            try:
                yield server
            finally:
                self._server = None

    @contextlib.contextmanager
    def devnet(self, section: str, *, fresh=True, synced=False, quiet_days=0, on_day=None):
        """anvil with the devnet and the section's migrated database (recreated when `fresh`,
        latETH imported and synced when `synced`): (node URL, latETH's manifest, database URL).
        `quiet_days` and `on_day(node URL, day, manifests)` go to deploy_devnet."""
        from devchain.anvil import start_anvil
        from devchain.devnet import deploy_devnet, devnet_genesis, write_manifests

        with (
            start_anvil(timestamp=devnet_genesis(quiet_days)) as node,
            tempfile.TemporaryDirectory(prefix="lat-bench-") as tmp,
        ):
            hook = on_day and (lambda day, manifests: on_day(node.url, day, manifests))
            deployed = deploy_devnet(node.url, quiet_days=quiet_days, on_day=hook)
            manifest = next(m for m in deployed if m["symbol"] == "latETH")
            db_url = dataset.with_database(self.db_url, self.db_name(section))
            env = {**self.env, "RPC_URL": node.url}
            dataset.create_database(db_url, recreate=fresh)
            dataset.manage(env, db_url, "migrate", "--noinput")
            if synced:
                dataset.manage(env, db_url, "lat_import", str(write_manifests([manifest], tmp)[0]))
                dataset.manage(env, db_url, "lat_sync", "--no-progress")
            yield node.url, manifest, db_url

    def probe(self, module: str, rpc_url: str, manifest: dict, db_url: str, *args: str) -> dict:
        """`python -m <module> RPC_URL MANIFEST_FILE <args>` in a process of its own, Django on
        `db_url`: the JSON of its last line of output."""
        env = {**self.env, "DATABASE_URL": db_url, "RPC_URL": rpc_url, "LOG_LEVEL": "WARNING"}
        with tempfile.NamedTemporaryFile("w", suffix=".json") as file:
            json.dump(manifest, file)
            file.flush()
            out = python("-m", module, rpc_url, file.name, *args, env=env | {"RPC_TIMEOUT": "300"})
        return json.loads(out.strip().splitlines()[-1])

    def measure(self, urls: list[str], *, warmup: float, pids=None) -> list[load.LoadResult]:
        """The URLs loaded together, the connections split between them, after `warmup` s; each
        result's `cpu` the run's, by group: the server, the database's backends, `pids`."""
        connections = max(1, self.args.connections // len(urls))
        sql = "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"

        def groups() -> dict[str, list[int]]:
            with dataset.connect(self.db_url, autocommit=True) as conn:
                db = [pid for (pid,) in conn.execute(sql)]
            server = load.children_of(self._server.process.pid) if self._server else []
            return {"server": server, "db": db, **(pids or {})}

        if warmup > 0:
            load.run(urls, duration=warmup, connections=connections)
        with load.CpuMonitor(groups) as monitor:
            results = load.run(urls, duration=self.args.duration, connections=connections)
        for result in results:
            result.cpu = monitor.usage
        return results

    def interleave(self, sides, *, rounds: int, duration: float, connections=0, warmup=0.0):
        """The (URL, POST body) sides, each after `warmup` s, loaded in turn `rounds` rounds of
        `duration` s, the order alternating (a b, b a, ...) so that every side sees the same
        drift of the machine: each side's rounds merged."""
        settings = {"duration": duration, "connections": connections or self.args.connections}
        for url, body in sides if warmup > 0 else ():
            load.run([url], body=body, **{**settings, "duration": warmup})
        runs: list[list[load.LoadResult]] = [[] for _ in sides]
        for k in range(rounds):
            for i in range(len(sides)) if k % 2 == 0 else reversed(range(len(sides))):
                runs[i] += load.run([sides[i][0]], body=sides[i][1], **settings)
        return [load.merge(one) for one in runs]
