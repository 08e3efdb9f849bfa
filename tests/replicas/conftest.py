from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.pgcluster import PrimaryAndReplica
from tests.processes import manage


@pytest.fixture(scope="module")
def pair(request: pytest.FixtureRequest) -> Iterator[PrimaryAndReplica]:
    """A primary and its streaming replica of the test module's own (tests/pgcluster.py), with
    the schema migrated in `pair.database` (named after the module) and replayed on the
    replica."""
    pair = PrimaryAndReplica(database=request.module.__name__.rpartition(".")[2])
    try:
        pair.start()
        manage("migrate", "--noinput", database=pair.primary.url(pair.database))
        pair.caught_up()
        yield pair
    finally:
        pair.close()
