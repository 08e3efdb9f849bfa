"""A PostgreSQL primary and its streaming replica of a test's own: the machine's PostgreSQL
binaries (they refuse root: run as the `postgres` user), data directories in a temporary
directory of their own, free ports; nothing of the machine's own cluster is touched."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import psycopg

from tests.ports import closed_port

PG_ROOT = Path("/usr/lib/postgresql")


def pg_bin(name: str) -> str:
    version = max(PG_ROOT.iterdir(), key=lambda p: int(p.name)) if PG_ROOT.is_dir() else None
    if version is None or not (version / "bin" / name).exists():
        found = shutil.which(name)
        if found is None:
            raise RuntimeError(f"PostgreSQL's {name} is not installed")
        return found
    return str(version / "bin" / name)


def _as_postgres(command: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *command] if os.geteuid() == 0 else command


def _run(command: list[str]) -> None:
    subprocess.run(_as_postgres(command), check=True, capture_output=True, timeout=120)


class Cluster:
    """One PostgreSQL server: `start`, `stop`, `sql`, `url`."""

    def __init__(self, root: Path, name: str) -> None:
        self.data = root / name
        self.log = root / f"{name}.log"
        self.port = closed_port()

    def url(self, database: str = "postgres") -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{database}"

    def start(self) -> None:
        options = (
            f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.data} -c fsync=off "
            "-c synchronous_commit=off -c full_page_writes=off -c shared_buffers=32MB "
            "-c max_connections=40"
        )
        _run([pg_bin("pg_ctl"), "-D", str(self.data), "-l", str(self.log), "-o", options, "-w",
              "-t", "60", "start"])  # fmt: skip

    def stop(self, mode: str = "fast") -> None:
        subprocess.run(
            _as_postgres([pg_bin("pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop"]),
            capture_output=True,
            timeout=60,
        )

    def postmaster(self) -> int:
        """The pid of the server's postmaster (the process that takes its connections)."""
        return int((self.data / "postmaster.pid").read_text().split()[0])

    def sql(self, query: str, database: str = "postgres") -> list[tuple]:
        with psycopg.connect(self.url(database), autocommit=True, connect_timeout=10) as conn:
            cursor = conn.execute(query)
            return cursor.fetchall() if cursor.description else []


class PrimaryAndReplica:
    """A primary (initdb) and a replica streaming from it (pg_basebackup -R), with an empty
    `database` for the service (named apart per test module: the processes of two modules
    running at once share a Redis, whose keys the service names after its database)."""

    def __init__(self, database: str = "lat") -> None:
        self.database = database
        self.root = Path(tempfile.mkdtemp(prefix="lat-pg-"))
        if os.geteuid() == 0:
            shutil.chown(self.root, "postgres", "postgres")
        self.primary = Cluster(self.root, "primary")
        self.replica = Cluster(self.root, "replica")

    def start(self) -> None:
        _run([pg_bin("initdb"), "-D", str(self.primary.data), "-A", "trust", "-U", "postgres",
              "--no-sync"])  # fmt: skip
        self.primary.start()
        self.primary.sql(f"CREATE DATABASE {self.database}")
        _run([pg_bin("pg_basebackup"), "-h", "127.0.0.1", "-p", str(self.primary.port),
              "-U", "postgres", "-D", str(self.replica.data), "-R", "-X", "stream",
              "--no-sync"])  # fmt: skip
        self.replica.start()
        deadline = time.monotonic() + 30
        while not self.replica.sql("SELECT pg_is_in_recovery()")[0][0]:
            if time.monotonic() > deadline:
                raise RuntimeError("the replica did not start in recovery")
            time.sleep(0.1)

    def caught_up(self, timeout: float = 30) -> None:
        """Wait until the replica replayed everything the primary wrote so far."""
        (target,) = self.primary.sql("SELECT pg_current_wal_lsn()")[0]
        deadline = time.monotonic() + timeout
        while True:
            (done,) = self.replica.sql(f"SELECT pg_last_wal_replay_lsn() >= '{target}'::pg_lsn")[0]
            if done:
                return
            if time.monotonic() > deadline:
                raise RuntimeError("the replica did not catch up")
            time.sleep(0.05)

    def close(self) -> None:
        self.replica.stop("immediate")
        self.primary.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)


class PgBouncer:
    """Debian's PgBouncer of the test's own, in transaction mode, in front of the PostgreSQL at
    `port` (every database), on a free port of its own; run as the `postgres` user."""

    def __init__(self, port: int = 5432) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="lat-pgbouncer-"))
        self.port = closed_port()
        (self.root / "users.txt").write_text('"postgres" ""\n')
        (self.root / "pgbouncer.ini").write_text(
            f"""[databases]
* = host=127.0.0.1 port={port}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {self.port}
unix_socket_dir =
auth_type = trust
auth_file = {self.root / "users.txt"}
pool_mode = transaction
admin_users = postgres
max_client_conn = 500
default_pool_size = 40
ignore_startup_parameters = extra_float_digits,options
logfile = {self.root / "pgbouncer.log"}
pidfile = {self.root / "pgbouncer.pid"}
"""
        )
        if os.geteuid() == 0:
            for path in (self.root, *self.root.iterdir()):
                shutil.chown(path, "postgres", "postgres")
        self.process: subprocess.Popen | None = None

    def url(self, database: str) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{database}"

    def start(self) -> None:
        binary = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
        self.process = subprocess.Popen(
            _as_postgres([binary, str(self.root / "pgbouncer.ini")]),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 30
        while True:
            try:
                with psycopg.connect(self.url("postgres"), connect_timeout=5) as conn:
                    conn.execute("SELECT 1")
                return
            except psycopg.OperationalError:
                if time.monotonic() > deadline or self.process.poll() is not None:
                    raise RuntimeError(
                        "PgBouncer did not start: "
                        + (self.root / "pgbouncer.log").read_text(errors="replace")[-2000:]
                    ) from None
                time.sleep(0.1)

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        shutil.rmtree(self.root, ignore_errors=True)
