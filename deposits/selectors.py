"""Reads of deposits: the newest-first listing, with paging that stays fast at any depth.

The listing is the hottest read of the service, so it reads plain rows and builds the records
itself (the serializers in deposits/api describe the same shape for the schema).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from django.db import connection
from django.utils.dateparse import parse_datetime

from core.replicas import reading
from deposits.models import (
    Deposit,
    DepositCheckpoint,
    DepositCount,
    DepositSpan,
    DepositSpanTotal,
)
from lats.models import Lat

FILTERS = {
    "liquidTokenAddress": "lat",
    "sender": DepositCount.Field.SENDER,
    "receiver": DepositCount.Field.RECEIVER,
    "asset": DepositCount.Field.ASSET,
}
_ADDRESS_FILTERS = ("sender", "receiver", "asset")
_TABLE = Deposit._meta.db_table
_LAT_TABLE = Lat._meta.db_table
_SPAN_TABLE = DepositSpan._meta.db_table
_COUNT_TABLE = DepositCount._meta.db_table
_SPAN_TOTAL_TABLE = DepositSpanTotal._meta.db_table
_KEY = "(d.block_number, d.log_index, d.chain_id)"
_NEWEST_FIRST = "ORDER BY d.block_number DESC, d.log_index DESC, d.chain_id DESC"
_SELECT_COLUMNS = """
SELECT d.sender, d.receiver, d.asset, l.proxy_address, {amount}, {shares},
       d.block_number, {created}, d.tx_hash, d.log_index, d.chain_id{{total}}
FROM {table} d JOIN {lat_table} l ON l.id = d.lat_id
"""
# PostgreSQL writes the amounts and the time as the records show them (decimal digits; ISO
# 8601 in UTC with a Z, microseconds only when there are some, as iso_instant writes it):
# converting 100 rows' NUMERICs and timestamps to Python and back cost more than reading them.
_CREATED_TEXT = (
    "to_char(d.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS')"
    " || CASE WHEN mod(extract(microseconds FROM d.created_at), 1000000) = 0 THEN ''"
    " ELSE to_char(d.created_at AT TIME ZONE 'UTC', '.US') END || 'Z'"
)
_SELECT_TEXT = _SELECT_COLUMNS.format(
    amount="d.amount::text",
    shares="d.shares::text",
    created=_CREATED_TEXT,
    table=_TABLE,
    lat_table=_LAT_TABLE,
)
_SELECT_VALUES = _SELECT_COLUMNS.format(
    amount="d.amount", shares="d.shares", created="d.created_at", table=_TABLE, lat_table=_LAT_TABLE
)


def _select(total: str = "") -> str:
    """The listing's SELECT; on PostgreSQL `total` (a scalar subquery) may be read with the
    rows, as their last column."""
    if connection.vendor != "postgresql":
        return _SELECT_VALUES.format(total="")
    return _SELECT_TEXT.format(total=f", ({total})" if total else "")


# Below this `skip` a page is read by walking the listing's index from the top; deeper, the
# walk starts at the span that holds the page (DepositSpan).
SHALLOW_SKIP = 1000
# The key of the deposit `position` places from the newest, in one statement: the span where
# the running count of deposits, newest span first, passes `position` (and how many deposits
# the newer spans hold), then the listing's index walked within that span. {spans} and {lats}
# narrow both to some LATs; the parameters are (position, span blocks, position).
_KEY_AT = f"""
target AS (
    SELECT span, upto - n AS newer FROM (
        SELECT span, n, SUM(n) OVER (ORDER BY span DESC) AS upto
        FROM {{spans}} AS per_span
    ) AS running
    WHERE upto > %s ORDER BY span DESC LIMIT 1
),
start AS (
    SELECT d.block_number, d.log_index, d.chain_id FROM {_TABLE} d
    WHERE d.block_number < (SELECT (span + 1) * %s FROM target) {{lats}}
    {_NEWEST_FIRST} LIMIT 1 OFFSET (SELECT %s - newer FROM target)
)
"""


def _key_at_sql(position: int, lat_ids: list[int] | None) -> tuple[str, list[Any]]:
    """_KEY_AT for some LATs (their ids are the rows' own integers, written in) and its
    parameters."""
    ids = ", ".join(str(int(i)) for i in lat_ids or [0])
    spans = (
        _SPAN_TOTAL_TABLE  # every LAT's, summed at indexing
        if lat_ids is None
        else f"(SELECT span, SUM(n) AS n FROM {_SPAN_TABLE} WHERE lat_id IN ({ids}) GROUP BY span)"
    )
    lats = "" if lat_ids is None else f"AND d.lat_id IN ({ids})"
    sql = _KEY_AT.format(spans=spans, lats=lats)
    return sql, [position, DepositSpan.SPAN_BLOCKS, position]


@dataclass(frozen=True)
class DepositKey:
    """Where a deposit stands in the listing: the listing's order, newest first."""

    block_number: int
    log_index: int
    chain_id: int


@dataclass(frozen=True)
class DepositPage:
    rows: list[dict[str, Any]]
    total: int
    next: DepositKey | None  # the last record's key when more records follow, else None


def iso_instant(value: datetime | str) -> str:
    """DRF's DateTimeField output: ISO 8601 in UTC with a Z."""
    parsed = parse_datetime(value) if isinstance(value, str) else value  # SQLite: a string
    if parsed is None:
        raise ValueError(f"not a date-time: {value!r}")
    text = parsed.astimezone(UTC).isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text


def _record(
    sender, receiver, asset, lat, amount, shares, block, created, tx_hash, log_index, _chain
) -> dict[str, Any]:
    """A listing row as its record; the amounts and the time as text (_SELECT_TEXT)."""
    return {
        "sender": sender,
        "receiver": receiver,
        "asset": asset,
        "liquidTokenAddress": lat,
        "amount": amount,
        "shares": shares,
        "createdAtBlock": block,
        "createdAt": created,
        "transactionHash": tx_hash,
        "logIndex": log_index,
    }


def _record_from_values(
    sender, receiver, asset, lat, amount, shares, block, created, *rest
) -> dict[str, Any]:
    """A listing row of _SELECT_VALUES (SQLite: the amounts are TEXT, the time a string)."""
    return _record(
        sender,
        receiver,
        asset,
        lat,
        str(int(Decimal(amount))),
        str(int(Decimal(shares))),
        block,
        iso_instant(created),
        *rest,
    )


@dataclass(frozen=True)
class _Filter:
    """The listing's filters as SQL: the LATs (None: any) and the address columns."""

    lat_ids: list[int] | None
    columns: dict[str, str]

    def where(self, alias: str) -> tuple[list[str], list[Any]]:
        clauses: list[str] = []
        params: list[Any] = []
        if self.lat_ids is not None:
            clauses.append(f"{alias}.lat_id IN ({', '.join(['%s'] * len(self.lat_ids))})")
            params += self.lat_ids
        for column, value in self.columns.items():
            clauses.append(f"{alias}.{column} = %s")
            params.append(value)
        return clauses, params


def _filter(filters: dict[str, str]) -> _Filter:
    lat_ids = None
    if "liquidTokenAddress" in filters:
        # Resolved first, so that the filter uses the (lat, key) index alone. One proxy address
        # may name LATs on several chains.
        lat_ids = list(
            Lat.objects.filter(proxy_address=filters["liquidTokenAddress"]).values_list(
                "id", flat=True
            )
        )
    columns = {FILTERS[name]: value for name, value in filters.items() if name in _ADDRESS_FILTERS}
    return _Filter(lat_ids=lat_ids, columns=columns)


def deposit_page(
    *, skip: int, take: int, filters: dict[str, str], after: DepositKey | None = None
) -> DepositPage:
    """Deposits newest first (block desc, log index desc, chain id desc) and how many match;
    with `after`, the `take` records that follow that key (keyset paging: what was inserted
    at the head meanwhile does not move the page).

    Every page walks one index backwards from a key: the top, the cursor's key, or (for a
    deep `skip` without an address filter) the key found from the per-span counts. Only a
    `skip` with a sender, receiver or asset filter walks `skip` rows of that filter's index:
    the cursor is the way deep into those. `meta.total` is read from DepositCount, except for
    two or more of sender, receiver and asset together, which are counted.
    """
    where = _filter(filters)
    if where.lat_ids == []:
        return DepositPage(rows=[], total=0, next=None)
    # On PostgreSQL, a total read from the counts comes with the rows, in their statement.
    counts = _counts_sql(where) if connection.vendor == "postgresql" else None
    if after is not None:
        rows = _rows(where, limit=take + 1, below=after, total=counts)
    elif skip >= SHALLOW_SKIP and not where.columns:
        rows = _rows_from_position(where, skip, limit=take + 1, total=counts)
    else:
        rows = _rows(where, limit=take + 1, offset=skip, total=counts)
    if counts is None or not rows:
        return _page(rows, take, _total(where))
    return _page([row[:-1] for row in rows], take, int(rows[0][-1] or 0))


# A statement's SQL and its parameters.
_Sql = tuple[str, list[Any]]


def _rows(
    where: _Filter,
    *,
    limit: int,
    offset: int = 0,
    below: DepositKey | None = None,
    total: _Sql | None = None,
) -> list[tuple]:
    """`limit` rows newest first, after `offset` rows, after the key `below` or from the
    top; with `total`, its value as each row's last column."""
    total_sql, params = total or ("", [])
    clauses, filter_params = where.where("d")
    params = [*params, *filter_params]
    if below is not None:
        clauses.append(f"{_KEY} < (%s, %s, %s)")
        params += [below.block_number, below.log_index, below.chain_id]
    sql = (
        _select(total_sql) + (f"WHERE {' AND '.join(clauses)} " if clauses else "") + _NEWEST_FIRST
    )
    with reading().cursor() as cursor:
        cursor.execute(sql + " LIMIT %s OFFSET %s", [*params, limit, offset])
        return cursor.fetchall()


def _rows_from_position(
    where: _Filter, position: int, *, limit: int, total: _Sql | None = None
) -> list[tuple]:
    """`limit` rows newest first from the one `position` places from the newest: one
    statement, the key found as deposit_key_at finds it, then the listing's index from it;
    with `total`, its value as each row's last column."""
    sql, params = _key_at_sql(position, where.lat_ids)
    total_sql, total_params = total or ("", [])
    clauses, filter_params = where.where("d")
    clauses.append(f"{_KEY} <= (SELECT block_number, log_index, chain_id FROM start)")
    select = _select(total_sql)
    statement = f"WITH {sql}{select}WHERE {' AND '.join(clauses)} {_NEWEST_FIRST} LIMIT %s"
    with reading().cursor() as cursor:
        cursor.execute(statement, [*params, *total_params, *filter_params, limit])
        return cursor.fetchall()


def deposit_key_at(position: int, *, lat_ids: list[int] | None = None) -> DepositKey | None:
    """The key of the deposit `position` places from the newest (0 is the newest), of every
    LAT or of `lat_ids`; None beyond the last. Two index walks in one statement: the LATs' span
    counts down to the span that holds it, then the listing's index within that span."""
    sql, params = _key_at_sql(position, lat_ids)
    with reading().cursor() as cursor:
        cursor.execute(f"WITH {sql} SELECT block_number, log_index, chain_id FROM start", params)
        key = cursor.fetchone()
    return DepositKey(*key) if key else None


def _page(rows: list, take: int, total: int) -> DepositPage:
    """The first `take` of `rows` (read one more, to know whether more follow)."""
    more = len(rows) > take
    rows = rows[:take]
    last = rows[-1] if more else None
    key = DepositKey(block_number=last[6], log_index=last[9], chain_id=last[10]) if last else None
    record = _record if connection.vendor == "postgresql" else _record_from_values
    return DepositPage(rows=[record(*row) for row in rows], total=total, next=key)


def _total(where: _Filter) -> int:
    """How many deposits match: the LATs' counts for no or one address filter, else a count."""
    counts = _counts_sql(where)
    if counts is None:
        clauses, params = where.where("d")
        with reading().cursor() as cursor:
            cursor.execute(f"SELECT COUNT(*) FROM {_TABLE} d WHERE {' AND '.join(clauses)}", params)
            return cursor.fetchone()[0]
    with reading().cursor() as cursor:
        cursor.execute(*counts)
        return int(cursor.fetchone()[0] or 0)


def _counts_sql(where: _Filter) -> _Sql | None:
    """How many deposits match, read from the LATs' counts (DepositCount); None for two or
    more address filters, which the counts do not hold."""
    if len(where.columns) > 1:
        return None
    field, address = next(iter(where.columns.items()), ("", ""))
    lats, lat_params = _Filter(lat_ids=where.lat_ids, columns={}).where("c")
    clauses = ["c.field = %s", "c.address = %s", *lats]
    return (
        f"SELECT SUM(n) FROM {_COUNT_TABLE} c WHERE {' AND '.join(clauses)}",
        [field, address, *lat_params],
    )


def deposit_total() -> int:
    """Every deposit of every LAT."""
    return _total(_Filter(lat_ids=None, columns={}))


# --- what the indexer reads -------------------------------------------------------------------


def lat_contracts(lat: Lat) -> dict[str, str]:
    """The LAT's proxies whose events the indexer reads, by their `activity_logs` names
    (`oracle` "" where the manifest names none)."""
    return {
        "proxy": lat.proxy_address,
        "manager": lat.proxy_of("liquidTokenManager"),
        "coordinator": lat.proxy_of("stakerNodeCoordinator"),
        "oracle": lat.contract_deployments.get("proxy", {}).get("tokenRegistryOracle") or "",
    }


def shared_log_range(
    *,
    lats: Iterable[Lat],
    head: int,
    max_range: int,
    addresses_of: Callable[[Lat], Iterable[str]],
) -> tuple[list[str], int]:
    """For one eth_getLogs over several LATs of a chain up to `head`: the contracts
    (`addresses_of` a LAT) of those whose checkpoint is at most `max_range` blocks behind it (a
    LAT further behind, or never indexed, reads its own ranges), and the first block one of
    them has not indexed yet (above `head` when all are there)."""
    lats = list(lats)
    checkpoints = dict(
        DepositCheckpoint.objects.filter(lat__in=lats).values_list("lat_id", "block_number")
    )
    near = [
        lat for lat in lats if lat.id in checkpoints and head - checkpoints[lat.id] <= max_range
    ]
    addresses = [address for lat in near for address in addresses_of(lat)]
    first = min((checkpoints[lat.id] + 1 for lat in near), default=head + 1)
    return addresses, first
