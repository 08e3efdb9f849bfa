"""Reads of a LAT's activity: its holders, its event feed, a wallet's positions and the LAT's
status. Each is a few index lookups; the documents are built here in the shapes that the
serializers of activity/api/serializers.py describe to the schema."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection

from core.addresses import checksum
from core.errors import NotFound
from core.replicas import reading
from deposits.models import (
    HOLDER_BUCKET_BITS,
    DepositCheckpoint,
    DepositCount,
    Event,
    Holder,
    HolderBucket,
    HolderTally,
)
from deposits.selectors import iso_instant
from lats.models import ChainHead, Lat, SyncStatus
from lats.selectors import lat_row
from lats.values import lat_balance_eth

# The feed's types, in the order of extensions.md's table (mints and burns are not in it).
FEED_TYPES: tuple[str, ...] = tuple(
    t for t in Event.Type.values if t not in (Event.Type.MINT, Event.Type.BURN)
)


def _iso(value: datetime | str | None) -> str | None:
    return None if value is None else iso_instant(value)


# --- holders ----------------------------------------------------------------------------------


def holder_page(*, lat_address: str, skip: int, take: int) -> tuple[list[dict[str, str]], int]:
    """One page of the holders of the LAT at `lat_address` (balance desc, then address asc)
    and how many there are, read from the tally, not counted; NotFound for an unknown LAT.

    Takes the address rather than the LAT's row: on PostgreSQL the LAT, its tally and the page
    are one statement (the hot path: building a Lat through the ORM cost as much as the page)."""
    if connection.vendor != "postgresql":
        return _holder_page_sorted(lat_row(address=lat_address), skip, take)
    sql = _HOLDER_PAGE_SHALLOW if skip < SHALLOW_SKIP else _HOLDER_PAGE_DEEP
    with reading().cursor() as cursor:
        cursor.execute(sql, {"lat": lat_address, "skip": skip, "take": take})
        rows = cursor.fetchall()
    if not rows:
        raise NotFound(f"No LAT at {lat_address}.")
    page = [{"address": checksum(a), "balance": str(b)} for _, a, b in rows if a is not None]
    return page, rows[0][0]


# Below this skip the holders' rank index is read with a plain OFFSET: walking this many index
# entries costs less than the buckets' scan, which sorts all the LAT's buckets (up to 4,047
# rows; the planner does not walk their index for a running sum) and sums their counts. On the
# bench's 100,000 holders (687 buckets) the scan costs about what an OFFSET of 4,000 does.
SHALLOW_SKIP = 2000
_LEAD = 1 << HOLDER_BUCKET_BITS
# A bucket key's upper balance, exclusive: (mantissa + 1) << shift (deposits.models.
# holder_bucket); the key above the highest is beyond every uint256.
BUCKET_CEILING_SQL = f"""CASE WHEN key < {2 * _LEAD} THEN key::numeric + 1
    ELSE (mod(key, {_LEAD}) + {_LEAD + 1})::numeric * 2::numeric ^ (key / {_LEAD} - 1) END"""


def _holder_page_sql(*, deep: bool) -> str:
    """The LAT's row (none: no such LAT) with its tally's total (0 without one), LEFT JOINed
    with the page, in one statement.

    Deep: two index lookups besides those rows, at any depth (deposits.models.HolderBucket):
    the LAT's buckets from the highest key down with a running count, up to the first whose
    running count passes `skip` (`start`: that bucket's upper balance, and how many holders of
    the bucket come before the page); then the holders' rank index from below that balance,
    with that small OFFSET (at most the bucket's count: the worst case is many equal
    balances). A skip beyond the last holder finds no bucket, hence no holder rows."""
    buckets = f"""
    , buckets AS (
        SELECT key, holders, sum(holders) OVER (ORDER BY key DESC) AS through
        FROM {HolderBucket._meta.db_table} WHERE lat_id = (SELECT id FROM lat)
    ), start AS MATERIALIZED (
        SELECT {BUCKET_CEILING_SQL} AS below, %(skip)s - (through - holders) AS skip
        FROM buckets WHERE through > %(skip)s ORDER BY key DESC LIMIT 1
    )"""
    bound, offset = "AND h.balance < (SELECT below FROM start)", "(SELECT skip FROM start)"
    return f"""
    WITH lat AS MATERIALIZED (
        SELECT id FROM {Lat._meta.db_table} WHERE proxy_address = %(lat)s
    ){buckets if deep else ""}
    SELECT coalesce(t.holders, 0), p.address, p.balance
    FROM lat LEFT JOIN {HolderTally._meta.db_table} t ON t.lat_id = lat.id LEFT JOIN (
        SELECT h.address, h.balance FROM {Holder._meta.db_table} h
        WHERE h.lat_id = (SELECT id FROM lat) AND h.balance > 0 {bound if deep else ""}
        ORDER BY h.balance DESC, h.address
        OFFSET {offset if deep else "%(skip)s"} LIMIT %(take)s
    ) p ON true
    """


_HOLDER_PAGE_SHALLOW = _holder_page_sql(deep=False)
_HOLDER_PAGE_DEEP = _holder_page_sql(deep=True)


def _holder_page_sorted(lat: Lat, skip: int, take: int) -> tuple[list[dict[str, str]], int]:
    """SQLite keeps integers above 2^63 as REAL or TEXT, which do not sort as numbers: the
    demo's few holders are sorted here instead."""
    total = HolderTally.objects.filter(lat=lat).values_list("holders", flat=True).first() or 0
    everyone = sorted(
        (
            (a, int(b))
            for a, b in Holder.objects.filter(lat=lat, balance__gt=0).values_list(
                "address", "balance"
            )
        ),
        key=lambda row: (-row[1], row[0]),
    )
    page = everyone[skip : skip + take]
    return [{"address": checksum(a), "balance": str(b)} for a, b in page], total


# --- the event feed ---------------------------------------------------------------------------


@dataclass(frozen=True)
class EventKey:
    block_number: int
    log_index: int


@dataclass(frozen=True)
class EventPage:
    rows: list[dict[str, Any]]
    next: EventKey | None  # the last record's key when more records follow


@dataclass(frozen=True)
class EventQuery:
    """Which of a LAT's events a page holds: the types, the block range (either bound
    optional), how many, and after which key (a cursor's) or from the newest."""

    types: tuple[str, ...]
    from_block: int | None
    to_block: int | None
    take: int
    after: EventKey | None


def event_page(*, lat_address: str, query: EventQuery) -> EventPage:
    """The events of the LAT at `lat_address` newest first (block number, then log index, both
    descending); NotFound for an unknown LAT.

    Takes the address, as holder_page does: on PostgreSQL the LAT and the page are one
    statement, a walk of the feed's index from the cursor (or the top) down."""
    if connection.vendor != "postgresql":
        return _event_page_orm(lat_row(address=lat_address), query)
    after = query.after
    params: dict[str, Any] = {
        "lat": lat_address,
        "types": list(query.types),
        "low": 0 if query.from_block is None else query.from_block,
        "high": _NO_BLOCK if query.to_block is None else query.to_block,
        "after_block": _NO_BLOCK if after is None else after.block_number,
        "after_log": 0 if after is None else after.log_index,
        "limit": query.take + 1,
    }
    with reading().cursor() as cursor:
        cursor.execute(_EVENT_PAGE, params)
        found = cursor.fetchall()
    if not found:
        raise NotFound(f"No LAT at {lat_address}.")
    rows = [row for row in found if row[0] is not None]
    return _event_page(
        [
            (kind, block, created, tx, index, json.loads(args))
            for kind, block, created, tx, index, args in rows
        ],
        query.take,
    )


# Above every block a feed holds (the cursor's and toBlock's bound when none is given).
_NO_BLOCK = 2**63 - 1
# The LAT's row (none: no such LAT) LEFT JOINed with its page: one row of NULLs for a LAT
# without events. The page walks the unique (lat, block_number, log_index) backwards from the
# cursor's key, or the (lat, type, block_number, log_index) index for one type.
_EVENT_PAGE = f"""
WITH lat AS MATERIALIZED (
    SELECT id FROM {Lat._meta.db_table} WHERE proxy_address = %(lat)s
)
SELECT e.type, e.block_number, e.created_at, e.tx_hash, e.log_index, e.args::text
FROM lat LEFT JOIN LATERAL (
    SELECT type, block_number, created_at, tx_hash, log_index, args
    FROM {Event._meta.db_table}
    WHERE lat_id = lat.id AND type = ANY(%(types)s)
      AND block_number >= %(low)s AND block_number <= %(high)s
      AND (block_number, log_index) < (%(after_block)s, %(after_log)s)
    ORDER BY block_number DESC, log_index DESC
    LIMIT %(limit)s
) e ON true
"""


def _event_page_orm(lat: Lat, query: EventQuery) -> EventPage:
    """The same page through the ORM (SQLite: the demo)."""
    events = Event.objects.filter(lat=lat, type__in=query.types)
    if query.from_block is not None:
        events = events.filter(block_number__gte=query.from_block)
    if query.to_block is not None:
        events = events.filter(block_number__lte=query.to_block)
    if (after := query.after) is not None:
        events = events.filter(block_number__lte=after.block_number).exclude(
            block_number=after.block_number, log_index__gte=after.log_index
        )
    rows = events.order_by("-block_number", "-log_index").values_list(
        "type", "block_number", "created_at", "tx_hash", "log_index", "args"
    )[: query.take + 1]
    return _event_page(list(rows), query.take)


def _event_page(rows: list[tuple], take: int) -> EventPage:
    """The page of `rows` (up to take + 1 of them, in the feed's order)."""
    more = len(rows) > take
    rows = rows[:take]
    return EventPage(
        rows=[event_document(*row) for row in rows],
        next=EventKey(rows[-1][1], rows[-1][4]) if more else None,
    )


def event_document(
    kind: str, block: int, created: datetime | str, tx_hash: str, log_index: int, args: Any
) -> dict[str, Any]:
    """An event as the feed serves it (and the webhooks' payloads carry it)."""
    return {
        "type": kind,
        "blockNumber": block,
        "blockTimestamp": _iso(created),
        "transactionHash": tx_hash,
        "logIndex": log_index,
        "args": args,
    }


# --- wallets ----------------------------------------------------------------------------------


def wallet_positions(*, address: str) -> list[dict[str, Any]]:
    """One position per LAT where the wallet holds a balance or received a deposit, ordered
    by chain id, then LAT address (lower-case hex order)."""
    balances = dict(
        Holder.objects.filter(address=address.lower(), balance__gt=0).values_list(
            "lat_id", "balance"
        )
    )
    deposits = dict(
        DepositCount.objects.filter(
            field=DepositCount.Field.RECEIVER, address=address, n__gt=0
        ).values_list("lat_id", "n")
    )
    lats = Lat.objects.filter(id__in=balances.keys() | deposits.keys())
    positions = []
    for lat in sorted(lats, key=lambda lat: (lat.chain_id, lat.proxy_address.lower())):
        balance = int(balances.get(lat.id, 0))
        value_eth = lat_balance_eth(lat, balance)  # None while the unit's ETH price is unknown
        positions.append(
            {
                "latAddress": lat.proxy_address,
                "latSymbol": lat.symbol,
                "chainId": lat.chain_id,
                "balance": str(balance),
                "valueEth": None if value_eth is None else float(value_eth),
                "deposits": deposits.get(lat.id, 0),
            }
        )
    return positions


# --- status -----------------------------------------------------------------------------------


def lat_status(*, lat: Lat) -> dict[str, Any]:
    """The LAT's pause and price state as of its stored state, and how far behind the chain
    the service is for it (from what the jobs recorded, never from a node)."""
    checkpoint = DepositCheckpoint.objects.filter(lat=lat).first()
    head = ChainHead.objects.filter(chain_id=lat.chain_id).first()
    last_success = (
        SyncStatus.objects.filter(lat=lat, job=SyncStatus.Job.STATE)
        .values_list("last_success_at", flat=True)
        .first()
    )
    indexed = checkpoint.block_number if checkpoint else None
    lag_blocks = lag_seconds = None
    if head is not None and checkpoint is not None:
        lag_blocks = max(0, head.block_number - checkpoint.block_number)
        if lag_blocks == 0:
            lag_seconds = 0
        elif checkpoint.block_time is not None:
            lag_seconds = max(0, int((head.block_time - checkpoint.block_time).total_seconds()))
    return {
        "paused": lat.paused,
        "pricesStale": lat.prices_stale,
        "lastPriceUpdate": _iso(lat.last_price_update),
        "stateBlock": lat.state_block,
        "indexedBlock": indexed,
        "chainHead": head.block_number if head else None,
        "lagBlocks": lag_blocks,
        "lagSeconds": lag_seconds,
        "lastSuccessAt": _iso(last_success),
    }
