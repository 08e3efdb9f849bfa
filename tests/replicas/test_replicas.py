"""Read replicas for real: the tests' own PostgreSQL primary and a streaming replica of it
(tests/pgcluster.py), the Procfile's web process reading through DATABASE_REPLICA_URLS. The
reads go to the replica once it replayed them, to the primary while it is held behind (replay
paused) or stopped, and every answer holds every write made before it, whichever answered."""

from __future__ import annotations

import http.client
import json
import os
import signal
import time
from collections.abc import Iterator

import pytest

from tests.pgcluster import PrimaryAndReplica
from tests.processes import database_reads, manage, moved, procfile_web


def add_lats(pair: PrimaryAndReplica, n: int) -> None:
    """n LATs written on the primary by another process, as a job would write them."""
    manage(
        "shell",
        "-c",
        "from tests.factories import AvsFactory, LatFactory\n"
        f"for made in (AvsFactory, LatFactory): made.reset_sequence({lats_on(pair)})\n"
        f"LatFactory.create_batch({n})",
        database=pair.primary.url(pair.database),
        replica=pair.replica.url(pair.database),
    )


def web_env(pair: PrimaryAndReplica) -> dict[str, str]:
    return os.environ | {
        "DATABASE_URL": pair.primary.url(pair.database),
        "DATABASE_REPLICA_URLS": pair.replica.url(pair.database),
        "REPLICA_RETRY_SECONDS": "0.5",
        "SYNC_LAG_ALERT_SECONDS": "100000000",
        # Every listing built from a database: a document found in the cache is answered by
        # none and counted by none (tests/latsite/test_documents.py).
        "DOCUMENT_CACHE_SECONDS": "0",
    }


@pytest.fixture(scope="module")
def web(pair) -> Iterator[str]:
    with procfile_web(web_env(pair)) as address:
        yield address


def get(web: str, path: str) -> tuple[int, bytes]:
    host, port = web.split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def listed(web: str) -> int:
    status, body = get(web, "/lat")
    assert status == 200, body
    return len(json.loads(body)["data"])


def lats_on(pair: PrimaryAndReplica) -> int:
    return pair.primary.sql("SELECT count(*) FROM lats_lat", pair.database)[0][0]


def test_reads_go_to_the_replica_once_it_replayed_the_writes(pair, web):
    add_lats(pair, 2)
    pair.caught_up()
    before = database_reads(web)
    assert listed(web) == lats_on(pair) == 2
    assert moved(before, database_reads(web)) == {"replica1": 1}

    status, body = get(web, "/health")
    assert status == 200
    (replica,) = json.loads(body)["checks"]["replicas"]
    assert replica["name"] == "replica1"
    assert replica["status"] == "ok"
    assert replica["lagSeconds"] is not None


def test_a_replica_held_behind_leaves_the_reads_to_the_primary(pair, web):
    pair.replica.sql("SELECT pg_wal_replay_pause()")
    try:
        add_lats(pair, 1)
        before = database_reads(web)
        # At once, though the replica has not replayed the new LAT: the primary answers.
        assert listed(web) == lats_on(pair)
        assert moved(before, database_reads(web)) == {"primary": 1}
        assert pair.replica.sql("SELECT count(*) FROM lats_lat", pair.database)[0][0] < lats_on(
            pair
        )
    finally:
        pair.replica.sql("SELECT pg_wal_replay_resume()")
    pair.caught_up()
    before = database_reads(web)
    assert listed(web) == lats_on(pair)
    assert moved(before, database_reads(web)) == {"replica1": 1}


def test_reads_go_on_while_the_replica_is_stopped(pair, web):
    pair.replica.stop("immediate")
    try:
        add_lats(pair, 1)
        before = database_reads(web)
        assert listed(web) == lats_on(pair)
        assert listed(web) == lats_on(pair)
        assert moved(before, database_reads(web)) == {"primary": 2}
        status, body = get(web, "/health")
        health = json.loads(body)
        assert status == 200
        assert health["status"] == "degraded"
        assert health["checks"]["replicas"][0]["status"] == "down"
    finally:
        pair.replica.start()
    pair.caught_up()
    time.sleep(0.6)  # REPLICA_RETRY_SECONDS: the failed replica is asked again after it
    before = database_reads(web)
    assert listed(web) == lats_on(pair)
    assert moved(before, database_reads(web)) == {"replica1": 1}


def test_a_frozen_replica_holds_a_read_no_longer_than_its_connect_timeout(pair):
    """The replica's server frozen (its postmaster stopped with SIGSTOP: the port still takes
    connections, nothing answers them): a web process that has no connection to it yet answers
    from the primary after REPLICA_CONNECT_TIMEOUT, not never, and /health says it is down."""
    add_lats(pair, 1)
    pair.caught_up()
    postmaster = pair.replica.postmaster()
    os.kill(postmaster, signal.SIGSTOP)
    try:
        with procfile_web(web_env(pair) | {"REPLICA_CONNECT_TIMEOUT": "2"}) as fresh:
            before, started = database_reads(fresh), time.monotonic()
            assert listed(fresh) == lats_on(pair)
            assert time.monotonic() - started < 2 + 5  # the timeout, and a slow machine's margin
            assert moved(before, database_reads(fresh)) == {"primary": 1}
            status, body = get(fresh, "/health")
            assert status == 200
            assert json.loads(body)["checks"]["replicas"][0]["status"] == "down"
    finally:
        os.kill(postmaster, signal.SIGCONT)
