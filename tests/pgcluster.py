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

    def sql(self, query: str, database: str = "postgres") -> list[tuple]:
        with psycopg.connect(self.url(database), autocommit=True, connect_timeout=10) as conn:
            cursor = conn.execute(query)
            return cursor.fetchall() if cursor.description else []


class PrimaryAndReplica:
    """A primary (initdb) and a replica streaming from it (pg_basebackup -R)."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="lat-pg-"))
        if os.geteuid() == 0:
            shutil.chown(self.root, "postgres", "postgres")
        self.primary = Cluster(self.root, "primary")
        self.replica = Cluster(self.root, "replica")

    def start(self) -> None:
        _run([pg_bin("initdb"), "-D", str(self.primary.data), "-A", "trust", "-U", "postgres",
              "--no-sync"])  # fmt: skip
        self.primary.start()
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
