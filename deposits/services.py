"""Writes of deposits: idempotent inserts and reorg removals that keep `seq` dense and ordered."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from django.db import connection, transaction
from django.db.models import Max, Q

from deposits.models import Deposit
from lats.models import Lat

# Key of the advisory lock that serialises writes to the deposit sequence.
SEQ_LOCK_KEY = 0x1A7_0001
# Seq values are moved above this while they are renumbered (the unique index forbids swaps).
_SHIFT = 10**15


@dataclass(frozen=True)
class DepositEvent:
    tx_hash: str
    log_index: int
    block_number: int
    block_hash: str
    created_at: datetime
    kind: str
    sender: str
    receiver: str
    asset: str
    amount: int
    shares: int

    @property
    def key(self) -> tuple[int, int]:
        return (self.block_number, self.log_index)


def _lock_sequence() -> None:
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [SEQ_LOCK_KEY])


def _after(block_number: int, log_index: int, chain_id: int) -> Q:
    """Rows ordered after (block, log, chain) in the listing's key."""
    return (
        Q(block_number__gt=block_number)
        | Q(block_number=block_number, log_index__gt=log_index)
        | Q(block_number=block_number, log_index=log_index, chain_id__gt=chain_id)
    )


def _renumber_from(block_number: int, log_index: int, chain_id: int) -> None:
    """Give every row at or after the key its dense rank again."""
    at_or_after = _after(block_number, log_index, chain_id) | Q(
        block_number=block_number, log_index=log_index, chain_id=chain_id
    )
    before = Deposit.objects.exclude(at_or_after).count()
    if not Deposit.objects.filter(at_or_after).exists():
        return
    table = Deposit._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} SET seq = seq + %s WHERE seq > %s",
            [_SHIFT, before],
        )
        cursor.execute(
            f"""
            UPDATE {table} SET seq = ranked.rank
            FROM (
                SELECT id, %s + ROW_NUMBER() OVER (
                    ORDER BY block_number, log_index, chain_id
                ) AS rank
                FROM {table} WHERE seq > %s
            ) AS ranked
            WHERE {table}.id = ranked.id
            """,
            [before, _SHIFT],
        )


@transaction.atomic
def deposit_record_events(*, lat: Lat, events: Iterable[DepositEvent]) -> int:
    """Insert the events not yet stored; returns how many were new. Running twice adds nothing."""
    events = sorted(events, key=lambda e: e.key)
    if not events:
        return 0
    _lock_sequence()
    existing = set(
        Deposit.objects.filter(
            chain_id=lat.chain_id, tx_hash__in={e.tx_hash for e in events}
        ).values_list("tx_hash", "log_index")
    )
    new = [e for e in events if (e.tx_hash, e.log_index) not in existing]
    if not new:
        return 0
    top = Deposit.objects.aggregate(top=Max("seq"))["top"] or 0
    first = new[0]
    out_of_order = Deposit.objects.filter(
        _after(first.block_number, first.log_index, lat.chain_id)
    ).exists()
    Deposit.objects.bulk_create(
        [
            Deposit(
                lat=lat,
                chain_id=lat.chain_id,
                seq=(top + _SHIFT if out_of_order else top) + offset,
                tx_hash=e.tx_hash,
                log_index=e.log_index,
                block_number=e.block_number,
                block_hash=e.block_hash,
                created_at=e.created_at,
                kind=e.kind,
                sender=e.sender,
                receiver=e.receiver,
                asset=e.asset,
                amount=e.amount,
                shares=e.shares,
            )
            for offset, e in enumerate(new, start=1)
        ],
        batch_size=2000,
    )
    if out_of_order:
        _renumber_from(first.block_number, first.log_index, lat.chain_id)
    return len(new)


@transaction.atomic
def deposit_remove_from_block(*, lat: Lat, block_number: int) -> int:
    """Remove the LAT's deposits at or after a block (orphaned by a reorg); returns how many."""
    _lock_sequence()
    doomed = Deposit.objects.filter(lat=lat, block_number__gte=block_number)
    first = (
        doomed.order_by("block_number", "log_index")
        .values_list("block_number", "log_index")
        .first()
    )
    if first is None:
        return 0
    removed, _ = doomed.delete()
    _renumber_from(first[0], first[1], lat.chain_id)
    return removed
