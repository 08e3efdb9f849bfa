"""Through PgBouncer in transaction mode: the API tests of the suite pass with DATABASE_URL at
a PgBouncer of the test's own (tests/pgcluster.py) in front of the machine's PostgreSQL, and
DATABASE_DIRECT_URL at the database itself for what needs a session (advisory locks, LISTEN).
They run in a pytest of their own, with a test database and a Redis database of their own."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import psycopg
import pytest

from tests.pgcluster import PgBouncer

REPO = Path(__file__).resolve().parents[2]

# The tests of the read and write API, the conditional GETs, the document cache and the locks.
API_TESTS = [
    "tests/lats/test_api.py",
    "tests/operators/test_api.py",
    "tests/deposits/test_api.py",
    "tests/deposits/test_activity_api.py",
    "tests/metrics/test_api.py",
    "tests/metrics/test_rates.py",
    "tests/catalog/test_yields.py",
    "tests/webhooks/test_api.py",
    "tests/latsite/test_conditional_get.py",
    "tests/latsite/test_documents.py",
    "tests/latsite/test_locks.py",
    "tests/latsite/test_health.py",
]


@pytest.fixture
def pgbouncer() -> Iterator[PgBouncer]:
    server = urlsplit(os.environ["DATABASE_URL"])
    bouncer = PgBouncer(port=server.port or 5432)
    try:
        bouncer.start()
        yield bouncer
    finally:
        bouncer.stop()


def test_the_api_tests_pass_behind_pgbouncer_in_transaction_mode(pgbouncer):
    direct = urlsplit(os.environ["DATABASE_URL"])
    database = "lat_pooler"
    # The environment of this process, but what a test of it may have left in it.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ETH_USD_FEED_", "RPC_URL"))}
    env |= {
        "DATABASE_URL": pgbouncer.url(database),
        "DATABASE_DIRECT_URL": direct._replace(path=f"/{database}").geturl(),
        "REDIS_URL": "redis://127.0.0.1:6379/9",
    }
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-x", "--create-db", *API_TESTS],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert done.returncode == 0, done.stdout[-6000:]
    passed = re.search(r"(\d+) passed", done.stdout)
    assert passed is not None
    assert int(passed.group(1)) > 100

    # PgBouncer carried the test database's transactions (its admin console's statistics).
    with psycopg.connect(pgbouncer.url("pgbouncer"), autocommit=True) as admin:
        cursor = admin.execute("SHOW STATS")
        columns = [c.name for c in cursor.description]
        stats = {row[0]: dict(zip(columns, row, strict=True)) for row in cursor.fetchall()}
    assert stats[f"test_{database}"]["total_xact_count"] > int(passed.group(1))
