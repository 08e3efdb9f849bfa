"""A follower that stops without dying: two `lat_follow` processes of the same chain on the test
database, the leading one frozen (SIGSTOP) while deposits go on. The standby takes the role
within FOLLOWER_LEASE_SECONDS (+ 2 s), and once the frozen one wakes (SIGCONT) it writes no row:
every statement the database runs is recorded with the `application_name` of its session (a
statement trigger on every table of the schema, the test's own), each process naming its own.
The deposits stored equal the chain's logs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.db import connection

from deposits.models import Deposit
from devchain.devnet import make_deposits
from tests.chainreads import chain_deposit_keys
from tests.processes import database_url

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.chain]

ROOT = Path(__file__).resolve().parents[2]
WAD = 10**18
LEASE = 4.0

AUDIT = """
CREATE TABLE test_writes (app text, tbl text, at timestamptz);
CREATE FUNCTION test_write_seen() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO test_writes VALUES (current_setting('application_name'), TG_TABLE_NAME,
                                  clock_timestamp());
  RETURN NULL;
END $$;
DO $$
DECLARE t text;
BEGIN
  FOR t IN SELECT tablename FROM pg_tables
           WHERE schemaname = 'public' AND tablename <> 'test_writes' LOOP
    EXECUTE format('CREATE TRIGGER test_write_seen AFTER INSERT OR UPDATE OR DELETE ON %I '
                   'FOR EACH STATEMENT EXECUTE FUNCTION test_write_seen()', t);
  END LOOP;
END $$;
"""

UNDO = """
DO $$
DECLARE t text;
BEGIN
  FOR t IN SELECT tablename FROM pg_tables
           WHERE schemaname = 'public' AND tablename <> 'test_writes' LOOP
    EXECUTE format('DROP TRIGGER IF EXISTS test_write_seen ON %I', t);
  END LOOP;
END $$;
DROP FUNCTION IF EXISTS test_write_seen();
DROP TABLE IF EXISTS test_writes;
"""


@pytest.fixture
def audited(db) -> Iterator[None]:
    with connection.cursor() as cursor:
        cursor.execute(AUDIT)
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute(UNDO)


class FollowProcess:
    def __init__(self, name: str, chain, logs: Path) -> None:
        self.name = name
        self.log = logs / f"{name}.log"
        env = {k: v for k, v in os.environ.items() if not k.startswith("RPC_URL")}
        env |= {
            "DATABASE_URL": database_url(),
            "RPC_URL": chain.url,
            "PGAPPNAME": name,  # libpq's application_name of every session the process opens
            "FOLLOWER_LEASE_SECONDS": str(LEASE),
            "HEAD_POLL_INTERVAL": "0.2",
            "PYTHONUNBUFFERED": "1",
        }
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, "manage.py", "lat_follow", "--chain", "31337"],
                cwd=ROOT,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    def says(self, text: str) -> bool:
        return text in self.log.read_text(errors="replace")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)
            self.process.terminate()
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)


def wait_for(predicate, timeout: float, what: str, *processes: FollowProcess) -> float:
    started = time.monotonic()
    while not predicate():
        if time.monotonic() - started > timeout:
            logs = "\n".join(f"--- {p.name}\n{p.log.read_text()[-3000:]}" for p in processes)
            raise AssertionError(f"{what} did not happen within {timeout} s\n{logs}")
        time.sleep(0.05)
    return time.monotonic() - started


def writes_by(app: str, since: str) -> list[tuple[str, str]]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT tbl, at::text FROM test_writes WHERE app = %s AND at > %s ORDER BY at",
            [app, since],
        )
        return cursor.fetchall()


def db_now() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT clock_timestamp()::text")
        return cursor.fetchone()[0]


def test_a_frozen_follower_loses_its_role_and_writes_nothing_when_it_wakes(
    imported, audited, tmp_path
):
    chain = imported
    manifest = chain.lat("latETH")
    token = manifest["tokens"][0]["address"]
    first = FollowProcess("follower-a", chain, tmp_path)
    second = None
    try:
        wait_for(lambda: first.says("following chain 31337"), 120, "a's start", first)
        second = FollowProcess("follower-b", chain, tmp_path)
        wait_for(lambda: second.says("has a follower already"), 120, "b's wait", first, second)
        deposits = len(chain_deposit_keys(chain))
        wait_for(lambda: Deposit.objects.count() == deposits, 120, "a's backfill", first)

        first.process.send_signal(signal.SIGSTOP)
        frozen_at = time.monotonic()
        done = make_deposits(chain.url, manifest, 13, [token], [2 * WAD])
        wait_for(
            lambda: Deposit.objects.filter(tx_hash=done["txHash"]).exists(),
            LEASE + 30,
            "the standby's indexing",
            first,
            second,
        )
        taken_over = time.monotonic() - frozen_at
        assert second.says("following chain 31337")
        assert taken_over <= LEASE + 2, taken_over

        woken = db_now()
        first.process.send_signal(signal.SIGCONT)
        wait_for(lambda: first.says("role is lost"), 30, "a standing by", first, second)
        again = make_deposits(chain.url, manifest, 14, [token], [WAD])
        wait_for(
            lambda: Deposit.objects.filter(tx_hash=again["txHash"]).exists(),
            30,
            "the new leader's indexing",
            first,
            second,
        )
        time.sleep(1)  # whatever the woken one might still do
        assert writes_by("follower-a", woken) == []
        assert writes_by("follower-b", woken) != []  # the audit sees the leader's writes
        stored = list(
            Deposit.objects.order_by("block_number", "log_index").values_list(
                "block_number", "log_index", "tx_hash", "block_hash"
            )
        )
        assert stored == chain_deposit_keys(chain)
    finally:
        first.stop()
        if second is not None:
            second.stop()
