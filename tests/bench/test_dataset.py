"""The bench's world (bench/dataset.py's raw SQL) loads on the migrated schema and holds what the
service would have written: each token link's kept stake is its LAT's nodes' assets summed."""

from __future__ import annotations

import psycopg
import pytest
from django.db import connection
from psycopg.types.string import StrDumper

from bench import dataset
from lats.models import LatToken

pytestmark = pytest.mark.django_db


def test_the_world_loads_with_the_links_stakes_summed():
    params = {kind: dataset.addresses(kind, n) for kind, n in dataset.ADDRESSES.items()}
    params |= {"apys": dataset.APYS}
    params |= {"deployments": [dataset.deployments(i) for i in range(dataset.LATS)]}
    connection.ensure_connection()
    # As the bench sends them: bound by the server (Django's cursors bind on the client), Python's
    # str as text.
    with psycopg.Cursor(connection.connection) as cursor:
        cursor.adapters.register_dumper(str, StrDumper)
        for sql in dataset.WORLD.split(";"):
            cursor.execute(sql, params if "%(" in sql else None)

    # By hand, from the world's formulas: node asset i belongs to node i // 3, so to LAT
    # i // 24, stakes (i + 1) * 93e18 of its LAT's token i % 3 (ids 3 * LAT + i % 3 + 1).
    expected: dict[tuple[int, int], int] = {}
    for i in range(dataset.LATS * dataset.NODES * dataset.TOKENS):
        lat = i // 24
        key = (lat + 1, 3 * lat + i % 3 + 1)
        expected[key] = expected.get(key, 0) + (i + 1) * 93 * 10**18
    stored = {
        (lat_id, token_id): int(amount)
        for lat_id, token_id, amount in LatToken.objects.values_list(
            "lat_id", "token_id", "staked_amount"
        )
    }
    assert stored == expected
    assert stored[(1, 1)] == (1 + 4 + 7 + 10 + 13 + 16 + 19 + 22) * 93 * 10**18
