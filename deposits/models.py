"""Every deposit into a LAT, as indexed from its events."""

from __future__ import annotations

from django.db import models

from lats.models import AddressField, Lat, UintField


class Deposit(models.Model):
    """One AssetDeposited (or legacy Deposit) event.

    `seq` is a dense rank (1..N) of all deposits in listing order, oldest first: block number,
    then log index, then chain id. The indexer keeps it dense at insert and on reorg, so the
    unfiltered listing pages by `seq` ranges and reads its total from the largest `seq`.
    """

    class Kind(models.TextChoices):
        ASSET_DEPOSITED = "AssetDeposited"
        DEPOSIT = "Deposit"

    lat = models.ForeignKey(Lat, on_delete=models.CASCADE, related_name="deposits")
    chain_id = models.PositiveBigIntegerField()
    seq = models.PositiveBigIntegerField(unique=True)
    tx_hash = models.CharField(max_length=66)
    log_index = models.PositiveIntegerField()
    block_number = models.PositiveBigIntegerField()
    block_hash = models.CharField(max_length=66)
    created_at = models.DateTimeField()
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.ASSET_DEPOSITED)
    sender = AddressField()
    receiver = AddressField()
    asset = AddressField()
    amount = UintField()
    shares = UintField()

    class Meta:
        ordering = ("-seq",)
        constraints = [
            models.UniqueConstraint(
                fields=("chain_id", "tx_hash", "log_index"), name="deposit_tx_log_uniq"
            ),
        ]
        indexes = [
            models.Index(fields=("lat", "-block_number", "-log_index"), name="deposit_lat_idx"),
            models.Index(
                fields=("sender", "-block_number", "-log_index"), name="deposit_sender_idx"
            ),
            models.Index(
                fields=("receiver", "-block_number", "-log_index"), name="deposit_receiver_idx"
            ),
            models.Index(fields=("asset", "-block_number", "-log_index"), name="deposit_asset_idx"),
            models.Index(fields=("lat", "block_number"), name="deposit_lat_block_idx"),
            # The listing key: renumbering `seq` finds its place by it.
            models.Index(fields=("block_number", "log_index", "chain_id"), name="deposit_key_idx"),
            models.Index(fields=("tx_hash",), name="deposit_tx_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.tx_hash}:{self.log_index}"


class DepositCheckpoint(models.Model):
    """How far the deposit indexer has got for one LAT, and the hash of that block; and the
    block REORG_MAX_DEPTH below it, taken as final (lats/indexing.py): a reorg that reaches it
    stops indexing instead of deleting history."""

    lat = models.OneToOneField(Lat, on_delete=models.CASCADE, related_name="deposit_checkpoint")
    block_number = models.PositiveBigIntegerField()
    block_hash = models.CharField(max_length=66)
    final_block = models.PositiveBigIntegerField(null=True, blank=True)
    final_hash = models.CharField(max_length=66, blank=True, default="")
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.lat.symbol} @ {self.block_number}"
