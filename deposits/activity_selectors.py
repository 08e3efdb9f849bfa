"""Reads of a LAT's activity: its holders, its event feed, a wallet's positions and the LAT's
status. Each is a few index lookups; the documents are built here in the shapes that the
serializers of deposits/api/activity_serializers.py describe to the schema."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection

from deposits.models import DepositCheckpoint, DepositCount, Event, Holder, HolderTally
from deposits.selectors import iso_instant
from lats.models import ChainHead, Lat, SyncStatus
from lats.values import lat_balance_eth
from latsite.addresses import checksum

# The feed's types, in the order of extensions.md's table (mints and burns are not in it).
FEED_TYPES: tuple[str, ...] = tuple(
    t for t in Event.Type.values if t not in (Event.Type.MINT, Event.Type.BURN)
)


def _iso(value: datetime | str | None) -> str | None:
    return None if value is None else iso_instant(value)


# --- holders ----------------------------------------------------------------------------------


def holder_page(*, lat: Lat, skip: int, take: int) -> tuple[list[dict[str, str]], int]:
    """One page of the LAT's holders (balance desc, then address asc) and how many there are,
    read from the tally, not counted."""
    total = HolderTally.objects.filter(lat=lat).values_list("holders", flat=True).first() or 0
    holders = Holder.objects.filter(lat=lat, balance__gt=0)
    if connection.vendor == "sqlite":
        # SQLite keeps integers above 2^63 as REAL or TEXT, which do not sort as numbers: the
        # demo's few holders are sorted here instead.
        everyone = sorted(
            ((a, int(b)) for a, b in holders.values_list("address", "balance")),
            key=lambda row: (-row[1], row[0]),
        )
        rows = everyone[skip : skip + take]
    else:
        page = holders.order_by("-balance", "address").values_list("address", "balance")
        rows = [(a, int(b)) for a, b in page[skip : skip + take]]
    return [{"address": checksum(a), "balance": str(b)} for a, b in rows], total


# --- the event feed ---------------------------------------------------------------------------


@dataclass(frozen=True)
class EventKey:
    block_number: int
    log_index: int


@dataclass(frozen=True)
class EventPage:
    rows: list[dict[str, Any]]
    next: EventKey | None  # the last record's key when more records follow


def event_page(
    *,
    lat: Lat,
    types: tuple[str, ...],
    from_block: int | None,
    to_block: int | None,
    take: int,
    after: EventKey | None,
) -> EventPage:
    """The LAT's events newest first (block number, then log index, both descending)."""
    events = Event.objects.filter(lat=lat, type__in=types)
    if from_block is not None:
        events = events.filter(block_number__gte=from_block)
    if to_block is not None:
        events = events.filter(block_number__lte=to_block)
    if after is not None:
        events = events.filter(block_number__lte=after.block_number).exclude(
            block_number=after.block_number, log_index__gte=after.log_index
        )
    rows = list(
        events.order_by("-block_number", "-log_index").values_list(
            "type", "block_number", "created_at", "tx_hash", "log_index", "args"
        )[: take + 1]
    )
    more = len(rows) > take
    rows = rows[:take]
    return EventPage(
        rows=[
            {
                "type": kind,
                "blockNumber": block,
                "blockTimestamp": _iso(created),
                "transactionHash": tx_hash,
                "logIndex": log_index,
                "args": args,
            }
            for kind, block, created, tx_hash, log_index, args in rows
        ],
        next=EventKey(rows[-1][1], rows[-1][4]) if more else None,
    )


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
        positions.append(
            {
                "latAddress": lat.proxy_address,
                "latSymbol": lat.symbol,
                "chainId": lat.chain_id,
                "balance": str(balance),
                "valueEth": float(lat_balance_eth(lat, balance)),
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
