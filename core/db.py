"""The generic database helpers every app uses: writes, and the hot reads' prepared statements."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import NotSupportedError, connection, connections, models
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.postgresql.base import (  # type: ignore[attr-defined]
    ServerBindingCursor,  # defined with psycopg 3, a dependency of the project
)
from psycopg.conninfo import make_conninfo

from core.locks import session_alias
from core.replicas import reading


def fetch_prepared(sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> list[tuple]:
    """The rows of one of the hot read statements, prepared on the server once per connection.

    On PostgreSQL with DB_PREPARED_STATEMENTS (the default) the statement is sent with its
    parameters bound by the server and prepared (psycopg keeps it per connection, which
    DB_CONN_MAX_AGE keeps open): planning the LAT detail's joins costs twice what running
    them does, and a prepared statement is planned again only when PostgreSQL decides a
    generic plan does no worse. Only statements whose plan does not hang on their
    parameters' values come here (a LAT's address). Off for a pooler that cannot keep
    prepared statements per client (PgBouncer before 1.21, or without max_prepared_statements
    in transaction mode); elsewhere (SQLite) a plain execute."""
    connection = reading()  # a replica where a read view chose one (core/replicas.py)
    prepared = connection.vendor == "postgresql" and settings.DB_PREPARED_STATEMENTS
    # Where Django logs queries (DEBUG, a test capturing them) the plain execute, whose log
    # shows the statement with its values (psycopg keeps no text of a prepared execution).
    if not prepared or connection.queries_logged:
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            return cursor.fetchall()
    try:
        return _fetch_prepared(connection, sql, params)
    except NotSupportedError as exc:
        if STALE_PLAN not in str(exc) or connection.in_atomic_block:
            raise
    # A migration changed the result columns of a statement this connection prepared before
    # it: PostgreSQL refuses it from then on. The connection's prepared statements are dropped
    # (psycopg forgets its own on seeing DEALLOCATE ALL) and this one is prepared anew.
    with connection.cursor() as cursor:
        cursor.execute("DEALLOCATE ALL")
    return _fetch_prepared(connection, sql, params)


# PostgreSQL's error for a prepared statement whose result columns a DDL statement changed.
STALE_PLAN = "cached plan must not change result type"


def _fetch_prepared(
    connection: BaseDatabaseWrapper, sql: str, params: Sequence[Any] | dict[str, Any]
) -> list[tuple]:
    connection.close_if_health_check_failed()
    connection.ensure_connection()
    connection.validate_thread_sharing()
    if connection.connection.prepare_threshold is None:
        # Django turns psycopg's preparing off for the connection; only server-binding
        # cursors prepare at all, and this function's are the only ones the service opens.
        connection.connection.prepare_threshold = 0
    if connection.execute_wrappers:  # a fenced job's (core/leadership.py): through Django's
        with connection.make_cursor(PreparedCursor(connection.connection)) as cursor:
            cursor.execute(sql, params)
            return cursor.fetchall()
    # What Django's cursor wrapper does for a statement, without a wrapper and a cursor per
    # call (a tenth of the LAT detail's statement, client side): its checks and its errors.
    connection.validate_no_broken_transaction()
    cursor = _prepared_cursor(connection)
    with connection.wrap_database_errors:
        cursor.execute(sql, params)
        return cursor.fetchall()


def _prepared_cursor(connection: BaseDatabaseWrapper) -> PreparedCursor:
    """The connection's own prepared-statement cursor, opened once per database session
    (a reconnection opens another)."""
    cursor: PreparedCursor | None = getattr(connection, "_lat_prepared_cursor", None)
    if cursor is None or cursor.connection is not connection.connection or cursor.closed:
        cursor = PreparedCursor(connection.connection)
        connection._lat_prepared_cursor = cursor  # type: ignore[attr-defined]
    return cursor


class PreparedCursor(ServerBindingCursor):
    """Django's server-binding cursor for psycopg 3, every statement prepared."""

    def execute(self, query, params=None, *, prepare=None, binary=None):
        return super().execute(query, params, prepare=True, binary=binary)


def model_assign(obj: models.Model, values: dict[str, Any]) -> list[str]:
    """Assign the values that differ (a Decimal and an int of the same number are equal);
    returns the names of the fields assigned."""
    changed = []
    for key, value in values.items():
        current = getattr(obj, key)
        if current != value and not (
            current is not None and value is not None and str(current) == str(value)
        ):
            setattr(obj, key, value)
            changed.append(key)
    return changed


def model_update(
    obj: models.Model, values: dict[str, Any], *, also: tuple[str, ...] = ()
) -> list[str]:
    """Assign the values that differ and save only those fields (with `also`, when any
    changed); returns the names of the changed fields."""
    changed = model_assign(obj, values)
    if changed:
        obj.save(update_fields=[*changed, *also])
    return changed


def bulk_insert(
    model: type[models.Model],
    columns: Sequence[str],
    rows: Iterable[Sequence[Any]],
    *,
    copy_line: Callable[[Any], str] | None = None,
    lines: Iterable[str] | None = None,
) -> None:
    """Insert rows of `columns` (column names) at once: COPY on PostgreSQL (a backfill writes
    many thousands), bulk_create elsewhere. No signals, no defaults: every column is given.
    `copy_line` may write a row's line of COPY's text format itself (tab-separated, escaped,
    ending in a newline), faster than the generic conversion of each value; `lines` are the
    rows' lines already written that way (then `rows` serve other databases only)."""
    if connection.vendor != "postgresql":
        by_column = {f.column: f.attname for f in model._meta.concrete_fields}
        attnames = [by_column[column] for column in columns]
        model._default_manager.bulk_create(
            [model(**dict(zip(attnames, row, strict=True))) for row in rows], batch_size=2000
        )
        return
    statement = f"COPY {model._meta.db_table} ({', '.join(columns)}) FROM STDIN"
    with connection.cursor() as cursor, cursor.cursor.copy(statement) as copy:  # psycopg 3
        # COPY's text format written by hand: one write per batch of rows, not a dumper call
        # per value (a backfill writes hundreds of thousands of rows).
        line = copy_line or _copy_line
        batch: list[str] = []
        for text in lines if lines is not None else map(line, rows):
            batch.append(text)
            if len(batch) == 5000:
                copy.write("".join(batch))
                batch.clear()
        copy.write("".join(batch))


_COPY_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})


def pg_array(items: Iterable[Any]) -> str:
    """A PostgreSQL array literal (`%s::bigint[]`, `%s::text[]`) of items that need no quoting
    (ids, hex, decimal digits): one string to bind, where a list is bound element by element."""
    return "{" + ",".join(map(str, items)) + "}"


def copy_escape(text: str) -> str:
    """A string as a value of COPY's text format."""
    return text.translate(_COPY_ESCAPES)


def _copy_line(row: Sequence[Any]) -> str:
    return "\t".join(map(_copy_text, row)) + "\n"


def _copy_text(value: Any) -> str:
    """A value in COPY's text format (NULL is \\N; dicts and lists as JSON)."""
    if value is None:
        return "\\N"
    if isinstance(value, str):
        return value.translate(_COPY_ESCAPES)
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":")).translate(_COPY_ESCAPES)
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, bool):
        return "t" if value else "f"
    return str(value)


def add_counts(
    model: type[models.Model], key_columns: Sequence[str], deltas: dict[tuple, int]
) -> None:
    """Add each delta to the `n` column of the row with that key (columns `key_columns`):
    positive ones inserting missing rows, negative ones to rows that exist (a CHECK on `n`
    holds for an insert's proposed row before its conflict is seen). Rows are locked in key
    order, so that two writers of overlapping keys wait for each other, never deadlock."""
    items = sorted((key, n) for key, n in deltas.items() if n)
    if connection.vendor == "postgresql":
        _add_counts_postgresql(model, key_columns, items)
        return
    table, columns = model._meta.db_table, ", ".join(key_columns)
    row = "(" + ", ".join(["%s"] * (len(key_columns) + 1)) + ")"
    match = " AND ".join(f"{c} = %s" for c in key_columns)
    added = [(key, n) for key, n in items if n > 0]
    with connection.cursor() as cursor:
        for i in range(0, len(added), 500):
            chunk = added[i : i + 500]
            cursor.execute(
                f"INSERT INTO {table} ({columns}, n) VALUES {', '.join([row] * len(chunk))} "
                f"ON CONFLICT ({columns}) DO UPDATE SET n = n + excluded.n",
                [value for key, n in chunk for value in (*key, n)],
            )
        cursor.executemany(
            f"UPDATE {table} SET n = n + %s WHERE {match}",
            [(n, *key) for key, n in items if n < 0],
        )


def _add_counts_postgresql(
    model: type[models.Model], key_columns: Sequence[str], items: list[tuple[tuple, int]]
) -> None:
    table, columns = model._meta.db_table, ", ".join(key_columns)
    by_column = {f.column: f for f in model._meta.concrete_fields}
    types = [by_column[c].db_type(connection) for c in (*key_columns, "n")]
    arrays = ", ".join(f"%s::{t}[]" for t in types)
    names = ", ".join((*key_columns, "n"))
    match = " AND ".join(f"t.{c} = u.{c}" for c in key_columns)
    statements = (
        f"INSERT INTO {table} AS t ({columns}, n) SELECT * FROM unnest({arrays}) "
        f"ON CONFLICT ({columns}) DO UPDATE SET n = t.n + EXCLUDED.n",
        f"UPDATE {table} AS t SET n = t.n + u.n FROM unnest({arrays}) AS u({names}) WHERE {match}",
    )
    parts = ([i for i in items if i[1] > 0], [i for i in items if i[1] < 0])
    with connection.cursor() as cursor:
        for statement, part in zip(statements, parts, strict=True):
            if part:
                rows = zip(*((*key, n) for key, n in part), strict=True)
                cursor.execute(statement, [list(column) for column in rows])


def listener_conninfo() -> str:
    """The database's connection settings, for a connection of a listener's own (LISTEN on
    PostgreSQL): DATABASE_DIRECT_URL's where DATABASE_URL goes through a pooler."""
    params = connections[session_alias()].get_connection_params()
    parts = {
        name: params[name]
        for name in ("dbname", "user", "password", "host", "port", "sslmode")
        if params.get(name)
    }
    return make_conninfo(**parts)
