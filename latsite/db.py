"""The generic write helpers every app's services use."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from django.db import connection, models


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
    model: type[models.Model], columns: Sequence[str], rows: Iterable[Sequence[Any]]
) -> None:
    """Insert rows of `columns` (column names) at once: COPY on PostgreSQL (a backfill writes
    many thousands), bulk_create elsewhere. No signals, no defaults: every column is given."""
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
        batch: list[str] = []
        for row in rows:
            batch.append("\t".join(map(_copy_text, row)) + "\n")
            if len(batch) == 5000:
                copy.write("".join(batch))
                batch.clear()
        copy.write("".join(batch))


_COPY_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})


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
