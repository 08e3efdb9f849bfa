from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.pgcluster import PrimaryAndReplica
from tests.processes import manage


@pytest.fixture(scope="module")
def pair() -> Iterator[PrimaryAndReplica]:
    """A primary and its streaming replica of the test module's own (tests/pgcluster.py), with
    the schema migrated in database `lat` and replayed on the replica."""
    pair = PrimaryAndReplica()
    try:
        pair.start()
        pair.primary.sql("CREATE DATABASE lat")
        manage("migrate", "--noinput", database=pair.primary.url("lat"))
        pair.caught_up()
        yield pair
    finally:
        pair.close()
