"""The freshness promise with a read replica held behind (extensions.md, "Freshness"; README,
"Scaling out"): the Procfile's `web` and `follower` lines run as they are, on a PostgreSQL
primary of the test's own with a streaming replica in DATABASE_REPLICA_URLS
(tests/replicas/conftest.py), against anvil at 2 confirmations. While the replica's replay is
paused, each deposit is still served by GET /metrics/deposits within 2 seconds of its
confirmation (the client and clock of tests/e2e/test_freshness.py, tests/freshness.py), and
the answers came from the primary: the web process's lat_database_reads_total counts them by
the database that answered, and the replica, asked directly, does not hold the deposits. Once
replay resumes, a deposit is served within the promise again and the reads go to the replica.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.conf import settings

from deposits.models import Deposit
from devchain.devnet import write_manifests
from lats.models import Lat, SyncStatus
from tests.conftest import Chain
from tests.freshness import (
    CHAIN_ID,
    CONFIRMATIONS,
    FIRST_PASS,
    WAD,
    Client,
    assert_fresh,
    confirmed_deposits,
    deposit,
    served_row,
    wait_for,
)
from tests.pgcluster import PrimaryAndReplica
from tests.processes import database_reads, manage, moved, procfile, procfile_web

pytestmark = [
    pytest.mark.chain,
    pytest.mark.parametrize("devnet_kind", ["multicall3"], indirect=True),  # one chain is enough
]


@dataclass
class Service:
    """The Procfile's web and follower on the pair's primary, reading through its replica."""

    web: str  # host:port
    follower: subprocess.Popen
    follower_log: Path

    def __post_init__(self) -> None:
        self.client = Client(f"http://{self.web}")

    def alive(self) -> bool:
        log = self.follower_log.read_text(errors="replace")[-3000:]
        assert self.follower.poll() is None, f"the follower exited\n{log}"
        return True


@pytest.fixture
def service(pair: PrimaryAndReplica, chain: Chain, tmp_path: Path) -> Iterator[Service]:
    primary, replica = pair.primary.url(pair.database), pair.replica.url(pair.database)
    files = map(str, write_manifests(chain.manifests, tmp_path))
    manage("lat_import", "--skip-chain-check", *files, database=primary)  # anvil's own
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RPC_URL", "WS_URL"))}
    env |= {
        "DATABASE_URL": primary,
        "DATABASE_DIRECT_URL": "",
        "DATABASE_REPLICA_URLS": replica,  # on every process that writes too (README)
        "RPC_URL": chain.url,
        f"CHAIN_CONFIRMATIONS_{CHAIN_ID}": str(CONFIRMATIONS),
    }
    log = tmp_path / "follower.log"
    with procfile("follower", env, log) as follower, procfile_web(env) as web:
        service = Service(web, follower, log)
        wait_for(  # the follower's first pass: every LAT indexed, refreshed and snapshotted
            lambda: service.alive() and first_pass_done(pair), FIRST_PASS, "the first pass"
        )
        assert [served_row(r) for r in service.client.deposits()] == confirmed_deposits(chain)
        yield service
        service.alive()


def first_pass_done(pair: PrimaryAndReplica) -> bool:
    """Every LAT's last step of a pass (its snapshot) succeeded once."""
    table, job = SyncStatus._meta.db_table, SyncStatus.Job.SNAPSHOT.value
    ((lats, done),) = pair.primary.sql(
        f"SELECT (SELECT count(*) FROM {Lat._meta.db_table}), count(*) FROM {table} "
        f"WHERE job = '{job}' AND last_success_at IS NOT NULL",
        pair.database,
    )
    return lats > 0 and done == lats


def replica_holds(pair: PrimaryAndReplica, tx_hash: str) -> bool:
    table = Deposit._meta.db_table
    rows = pair.replica.sql(
        f"SELECT count(*) FROM {table} WHERE tx_hash = '{tx_hash}'", pair.database
    )
    return rows[0][0] > 0


def test_a_replica_held_behind_leaves_the_reads_to_the_primary_within_the_promise(
    pair, chain, service
):
    client = service.client
    pair.replica.sql("SELECT pg_wal_replay_pause()")
    try:
        wait_for(
            lambda: pair.replica.sql("SELECT pg_get_wal_replay_pause_state()")[0][0] == "paused",
            30,
            "replay paused",
        )
        client.deposits()  # the generation of before the pause, whoever answers it
        before = database_reads(service.web)
        made = []
        for n, (symbol, wallet) in enumerate([("latETH", 13), ("latBTC", 14)]):
            expected = deposit(chain, chain.lat(symbol), wallet, (n + 2) * WAD)
            time.sleep(1.5 * settings.HEAD_POLL_INTERVAL)  # as tests/e2e/test_freshness.py
            assert_fresh(client, chain, expected, "deposit, the replica held behind")
            made.append(expected["transactionHash"])
        answered = moved(before, database_reads(service.web))
        assert set(answered) == {"primary"}  # at least one answer listing each deposit
        assert answered["primary"] >= len(made)
        assert not any(replica_holds(pair, tx) for tx in made)  # it was behind all along
    finally:
        pair.replica.sql("SELECT pg_wal_replay_resume()")

    pair.caught_up()
    assert all(replica_holds(pair, tx) for tx in made)
    expected = deposit(chain, chain.lat("latETH"), 15, 4 * WAD)
    time.sleep(1.5 * settings.HEAD_POLL_INTERVAL)
    assert_fresh(client, chain, expected, "deposit, replay resumed")
    pair.caught_up()

    def answered_by_the_replica() -> bool:
        """A read answered whole (no ETag: an answer of its own, not a 304), by the replica?
        The replica's lag is known to web as of its last check (REPLICA_CHECK_SECONDS): on a
        busy machine the replay may lag a moment longer after the catch-up."""
        before = database_reads(service.web)
        fresh = Client(f"http://{service.web}")
        assert [served_row(r) for r in fresh.deposits()] == confirmed_deposits(chain)
        return moved(before, database_reads(service.web)) == {"replica1": 1}

    wait_for(answered_by_the_replica, 10, "a read answered by the replica after the resume")
