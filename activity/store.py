"""Writes of the activity feed and the holders' balances, from the logs the indexer reads.

Both are stored with the deposits of the same block range and its checkpoint, in one
transaction (activity/indexer.py). Balances move by the `Transfer` events' values, so that a
reorg rolls them back exactly by the values of the events it removes.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection, transaction
from django.db.models import F

from chain.activity import ActivityLog
from chain.results import block_time
from core.db import bulk_insert, copy_escape, pg_array
from deposits.models import Event, Holder, HolderBucket, HolderTally, holder_bucket
from lats.models import Lat

# Addresses asked for at once when reading the balances a range moves.
_CHUNK = 5000
_MOVES = (Event.Type.TRANSFER, Event.Type.MINT, Event.Type.BURN)
_EVENT_COLUMNS = (
    "lat_id",
    "block_number",
    "log_index",
    "tx_hash",
    "block_hash",
    "created_at",
    "type",
    "args",
)


@dataclass(frozen=True)
class EventRows:
    """Logs made ready to store without the database (in the read-ahead thread, while the
    range before is stored): each log's COPY line by key, and the balance moves of them all."""

    lines: dict[tuple[int, int], str]
    deltas: dict[str, int]
    first_blocks: dict[str, int]


def event_rows(
    *, lat_id: int, logs: Sequence[ActivityLog], timestamps: dict[int, int]
) -> EventRows:
    """The logs' EventRows; `timestamps` as activity_record takes them."""
    times, line = log_times(logs, timestamps), _event_line()
    lines = {log.key: line(_event_row(lat_id, log, times)) for log in logs}
    deltas, first_blocks = _deltas((log.type, log.args, log.block_number) for log in logs)
    return EventRows(lines, deltas, first_blocks)


def _event_row(lat_id: int, log: ActivityLog, times: dict[int, datetime]) -> tuple:
    """A log as an Event row of _EVENT_COLUMNS."""
    return (
        lat_id,
        log.block_number,
        log.log_index,
        log.tx_hash,
        log.block_hash,
        times[log.block_number],
        log.type,
        log.args,
    )


def join_event_rows(parts: Sequence[EventRows]) -> EventRows:
    """The EventRows of consecutive ranges as one."""
    if len(parts) == 1:
        return parts[0]
    lines: dict[tuple[int, int], str] = {}
    deltas: dict[str, int] = defaultdict(int)
    first_blocks: dict[str, int] = {}
    for part in parts:
        lines.update(part.lines)
        for address, delta in part.deltas.items():
            deltas[address] += delta
        for address, block in part.first_blocks.items():
            first_blocks.setdefault(address, block)  # the ranges come in block order
    return EventRows(lines, {a: d for a, d in deltas.items() if d}, first_blocks)


def activity_record(
    *,
    lat: Lat,
    logs: Sequence[ActivityLog],
    timestamps: dict[int, int],
    rows: EventRows | None = None,
) -> list[ActivityLog]:
    """Store the logs not yet stored and move the balances by their transfers; returns the
    new logs. `timestamps` gives each block's time where the logs lack it; `rows`, the logs'
    EventRows where they were made ahead. Running twice adds nothing. Call inside a
    transaction."""
    if not logs:
        return []
    stored = set(
        Event.objects.filter(
            lat=lat,
            block_number__gte=min(log.block_number for log in logs),
            block_number__lte=max(log.block_number for log in logs),
        ).values_list("block_number", "log_index")
    )
    new = [log for log in logs if log.key not in stored]
    if rows is None or stored:
        rows = event_rows(lat_id=lat.id, logs=new, timestamps=timestamps)

    def values() -> Iterator[tuple]:  # run only without COPY: PostgreSQL takes the lines
        times = log_times(new, timestamps)
        for log in new:
            yield _event_row(lat.id, log, times)

    bulk_insert(Event, _EVENT_COLUMNS, values(), lines=rows.lines.values())
    if rows.deltas:
        _move_balances(lat, rows.deltas, rows.first_blocks)
    return new


def log_times(logs: Iterable[ActivityLog], timestamps: dict[int, int]) -> dict[int, datetime]:
    """Each log's block time by block number: the log's own timestamp where the node includes
    it, else the block's from `timestamps`; converted once per block."""
    times: dict[int, datetime] = {}
    for log in logs:
        if log.block_number not in times:
            stamp = log.block_timestamp
            times[log.block_number] = block_time(
                stamp if stamp is not None else timestamps[log.block_number]
            )
    return times


_JSON = json.JSONEncoder(separators=(",", ":")).encode


def _event_line() -> Callable[[tuple], str]:
    """An Event row in COPY's text format (a backfill writes hundreds of thousands): the
    block's time and hashes written once per block and transaction, the arguments as compact
    JSON."""
    texts: dict[Any, str] = {}  # instants and hashes, each written once

    def text(value: Any) -> str:
        written = texts.get(value)
        if written is None:
            written = texts[value] = (
                value.isoformat() if isinstance(value, datetime) else copy_escape(value)
            )
        return written

    def line(row: tuple) -> str:
        lat_id, block, index, tx_hash, block_hash, created, kind, args = row
        arguments = _JSON(args)
        if "\\" in arguments:
            arguments = copy_escape(arguments)
        return (
            f"{lat_id}\t{block}\t{index}\t{text(tx_hash)}\t{text(block_hash)}"
            f"\t{text(created)}\t{kind}\t{arguments}\n"
        )

    return line


def activity_remove_from_block(*, lat: Lat, block_number: int) -> int:
    """Remove the LAT's events at or after a block (orphaned by a reorg) and take their
    transfers back out of the balances; returns how many events went."""
    with transaction.atomic():
        doomed = Event.objects.filter(lat=lat, block_number__gte=block_number)
        moves = doomed.filter(type__in=_MOVES).values_list("type", "args", "block_number")
        deltas, _ = _deltas((kind, args, number) for kind, args, number in moves)
        removed, _ = doomed.delete()
        if deltas:
            _move_balances(lat, {a: -d for a, d in deltas.items()}, {})
        # Addresses first credited in the orphaned blocks never held the LAT on this branch.
        gone, _ = Holder.objects.filter(lat=lat, first_block__gte=block_number).delete()
        if gone:
            HolderTally.objects.filter(lat=lat).update(ever=F("ever") - gone)
    return removed


def _deltas(
    moves: Iterable[tuple[str, dict, int]],
) -> tuple[dict[str, int], dict[str, int]]:
    """Each address's balance change (lower-case hex) and the first block that credits it."""
    deltas: dict[str, int] = defaultdict(int)
    first_blocks: dict[str, int] = {}
    for kind, args, block_number in moves:
        if kind not in _MOVES:
            continue
        value = int(args["value"])
        if kind != Event.Type.MINT:
            deltas[args["from"].lower()] -= value
        if kind != Event.Type.BURN:
            to = args["to"].lower()
            deltas[to] += value
            first_blocks[to] = min(first_blocks.get(to, block_number), block_number)
    return {a: d for a, d in deltas.items() if d}, first_blocks


def _move_balances(lat: Lat, deltas: dict[str, int], first_blocks: dict[str, int]) -> None:
    """Add the deltas to the balances, the holders that appeared or left to the tally, and
    each moved holder from the rank bucket of its balance before to that of its balance after
    (deposits.models.HolderBucket)."""
    addresses = sorted(deltas.keys() | first_blocks.keys())
    if connection.vendor == "postgresql":
        moved = _add_in_place(lat, addresses, deltas, first_blocks)
    else:
        moved = _add_read_then_write(lat, addresses, deltas, first_blocks)
    joined = left = created = 0
    buckets: dict[int, int] = defaultdict(int)
    for address, before, after, new in moved:
        if after < 0:
            raise ValueError(
                f"the balance of {address} in {lat.proxy_address} would go below zero: "
                "the stored transfers miss some of the chain's"
            )
        joined += before == 0 and after > 0
        left += before > 0 and after == 0
        created += new
        if before > 0:
            buckets[holder_bucket(before)] -= 1
        if after > 0:
            buckets[holder_bucket(after)] += 1
    _move_buckets(lat, {key: n for key, n in buckets.items() if n})
    tally, _ = HolderTally.objects.get_or_create(lat=lat)
    HolderTally.objects.filter(pk=tally.pk).update(
        holders=F("holders") + joined - left, ever=F("ever") + created
    )


# Each address's balance moved by its delta in one statement: new rows inserted with the
# delta, existing ones added to; RETURNING gives (address, balance after, inserted).
_ADD = f"""
INSERT INTO {Holder._meta.db_table} AS h (lat_id, address, balance, first_block)
SELECT %s, u.address, u.delta, u.first_block
FROM unnest(%s::varchar[], %s::numeric[], %s::bigint[]) AS u(address, delta, first_block)
ON CONFLICT (lat_id, address) DO UPDATE SET balance = h.balance + EXCLUDED.balance
RETURNING h.address, h.balance, xmax = 0
"""


def _add_in_place(
    lat: Lat, addresses: list[str], deltas: dict[str, int], first_blocks: dict[str, int]
) -> list[tuple[str, int, int, bool]]:
    # A new row is inserted with its delta as its balance: "before" is then 0; else it is the
    # balance after less the delta.
    # Array literals written here: plain hex addresses and integers need no quoting, and
    # thousands of elements are joined faster than psycopg adapts a list element by element.
    params: list[Any] = [
        lat.id,
        pg_array(addresses),
        pg_array(deltas.get(a, 0) for a in addresses),
        pg_array(first_blocks.get(a, 0) for a in addresses),
    ]
    with connection.cursor() as cursor:
        cursor.execute(_ADD, params)
        return [
            (address, 0 if new else int(after) - deltas.get(address, 0), int(after), new)
            for address, after, new in cursor.fetchall()
        ]


def _add_read_then_write(
    lat: Lat, addresses: list[str], deltas: dict[str, int], first_blocks: dict[str, int]
) -> list[tuple[str, int, int, bool]]:
    stored: dict[str, tuple[int, int]] = {}
    for i in range(0, len(addresses), _CHUNK):
        chunk = addresses[i : i + _CHUNK]
        stored.update(
            (address, (int(balance), first))
            for address, balance, first in Holder.objects.filter(
                lat=lat, address__in=chunk
            ).values_list("address", "balance", "first_block")
        )
    moved, rows = [], []
    for address in addresses:
        before, first = stored.get(address) or (0, first_blocks[address])
        after = before + deltas.get(address, 0)
        moved.append((address, before, after, address not in stored))
        rows.append(Holder(lat=lat, address=address, balance=after, first_block=first))
    Holder.objects.bulk_create(
        rows,
        batch_size=2000,
        update_conflicts=True,
        unique_fields=("lat", "address"),
        update_fields=("balance",),
    )
    return moved


# Each bucket's count moved by its change in one statement; RETURNING gives the counts after,
# so that the buckets left empty are deleted (a page's scan of the buckets meets no empty one).
_BUCKETS = f"""
INSERT INTO {HolderBucket._meta.db_table} AS b (lat_id, key, holders)
SELECT %s, u.key, u.change FROM unnest(%s::smallint[], %s::integer[]) AS u(key, change)
ON CONFLICT (lat_id, key) DO UPDATE SET holders = b.holders + EXCLUDED.holders
RETURNING b.key, b.holders
"""


def _move_buckets(lat: Lat, changes: dict[int, int]) -> None:
    """Add the changes to the LAT's bucket counts (key: holders in less holders out)."""
    if not changes:
        return
    keys = sorted(changes)
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(_BUCKETS, [lat.id, keys, [changes[k] for k in keys]])
            after = dict(cursor.fetchall())
    else:
        stored = dict(
            HolderBucket.objects.filter(lat=lat, key__in=keys).values_list("key", "holders")
        )
        after = {k: stored.get(k, 0) + changes[k] for k in keys}
        HolderBucket.objects.bulk_create(
            [HolderBucket(lat=lat, key=k, holders=n) for k, n in after.items()],
            update_conflicts=True,
            unique_fields=("lat", "key"),
            update_fields=("holders",),
        )
    if any(n < 0 for n in after.values()):
        raise ValueError(f"a holder bucket of {lat.proxy_address} would count below zero")
    if emptied := [k for k, n in after.items() if n == 0]:
        HolderBucket.objects.filter(lat=lat, key__in=emptied).delete()
