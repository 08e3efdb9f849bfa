"""The LAT list and detail statements, prepared once per database connection
(core.db.fetch_prepared), answer what the plain statements do, and the setting turns it off."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.db import InterfaceError, OperationalError, ProgrammingError, connection
from django.test.utils import CaptureQueriesContext

from core.db import fetch_prepared

pytestmark = pytest.mark.django_db

LAT = "SELECT proxy_address, symbol FROM lats_lat WHERE proxy_address = %s"


def prepared_statements() -> list[tuple[str, int]]:
    """The statements prepared on this connection and how often each ran, by its text."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement, generic_plans + custom_plans FROM pg_prepared_statements")
        return cursor.fetchall()


def test_a_statement_is_prepared_once_and_answers_per_parameter(dataset):
    eth, native = dataset.eth_lat, dataset.native_lat
    for _ in range(3):
        assert fetch_prepared(LAT, [eth.proxy_address]) == [(eth.proxy_address, eth.symbol)]
        assert fetch_prepared(LAT, [native.proxy_address]) == [
            (native.proxy_address, native.symbol)
        ]
    assert fetch_prepared(LAT, ["0x" + "00" * 20]) == []
    ((statement, runs),) = prepared_statements()
    assert "FROM lats_lat WHERE proxy_address = $1" in statement
    assert runs == 7


def test_where_queries_are_logged_they_run_unprepared_and_show_their_values(dataset):
    """Query counts (tests/latsite/test_query_counts.py) and DEBUG's log see the statement
    with its values, which psycopg keeps no text of once prepared."""
    address = dataset.eth_lat.proxy_address
    with CaptureQueriesContext(connection) as queries:
        assert fetch_prepared(LAT, [address]) == [(address, dataset.eth_lat.symbol)]
    assert [q["sql"] for q in queries.captured_queries] == [LAT.replace("%s", f"'{address}'")]
    assert prepared_statements() == []


def test_the_setting_turns_preparing_off(dataset, settings):
    settings.DB_PREPARED_STATEMENTS = False
    eth = dataset.eth_lat
    assert fetch_prepared(LAT, [eth.proxy_address]) == [(eth.proxy_address, eth.symbol)]
    assert prepared_statements() == []


@pytest.mark.django_db(transaction=True)  # the session ends: no test transaction around it
def test_a_new_session_prepares_again_and_errors_are_djangos(dataset):
    # The statement runs on a cursor of the session's own: a closed connection's is not used.
    eth = dataset.eth_lat
    assert fetch_prepared(LAT, [eth.proxy_address]) == [(eth.proxy_address, eth.symbol)]
    first = connection.connection
    connection.connection.close()  # the session ends under Django (a restarted server)
    with pytest.raises((OperationalError, InterfaceError)):  # Django's, not psycopg's
        fetch_prepared(LAT, [eth.proxy_address])
    connection.close()
    assert fetch_prepared(LAT, [eth.proxy_address]) == [(eth.proxy_address, eth.symbol)]
    assert connection.connection is not first
    assert [runs for _, runs in prepared_statements()] == [1]
    with pytest.raises(ProgrammingError):  # Django's, as the cursor wrapper would raise
        fetch_prepared("SELECT no_such_column FROM lats_lat WHERE proxy_address = %s", ["x"])


def test_an_execute_wrapper_sees_the_statement(dataset):
    # A fenced job's wrapper (core/leadership.py) runs around every statement, these too.
    seen = []

    def wrapper(execute, sql, params, many, context):
        seen.append((sql, tuple(params)))
        return execute(sql, params, many, context)

    eth = dataset.eth_lat
    with connection.execute_wrapper(wrapper):
        assert fetch_prepared(LAT, [eth.proxy_address]) == [(eth.proxy_address, eth.symbol)]
    assert seen == [(LAT, (eth.proxy_address,))]


def test_the_lat_endpoints_read_through_prepared_statements(api, dataset, settings):
    settings.DOCUMENT_CACHE_SECONDS = 0
    address = dataset.eth_lat.proxy_address
    for _ in range(2):
        assert api.get(f"/lat/{address}", {"withTvl": "true"}).status_code == 200
        assert api.get("/lat").status_code == 200
    statements = dict(prepared_statements())
    assert len(statements) == 2
    assert sorted(statements.values()) == [2, 2]


@pytest.mark.django_db(transaction=True)
def test_a_statement_prepared_before_a_migration_changed_its_columns_runs_again():
    """A deploy's migration changes a column's type while a connection holds the statement
    prepared: PostgreSQL refuses the old one ("cached plan must not change result type"),
    and the read prepares it anew instead of failing until the connection is recycled."""
    import psycopg

    table = "prepared_stale_test"
    select = f"SELECT x FROM {table} WHERE id = %s"
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE TABLE {table} (id integer PRIMARY KEY, x integer)")
        cursor.execute(f"INSERT INTO {table} VALUES (1, 7)")
    try:
        assert fetch_prepared(select, [1]) == [(7,)]
        # The migration, from a connection of its own (another process in a deploy).
        params = connection.get_connection_params()
        with psycopg.connect(**params, autocommit=True) as migration:
            migration.execute(f"ALTER TABLE {table} ALTER COLUMN x TYPE numeric(10, 2)")
            migration.execute(f"UPDATE {table} SET x = 7.5")
        assert fetch_prepared(select, [1]) == [(Decimal("7.50"),)]
        assert fetch_prepared(select, [1]) == [(Decimal("7.50"),)]
        ((statement, runs),) = prepared_statements()
        assert f"FROM {table} WHERE id = $1" in statement
        assert runs == 2
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f"DROP TABLE {table}")
