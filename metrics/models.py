"""Point-in-time snapshots of a LAT's aggregate metrics, the source of its history and APY."""

from __future__ import annotations

from django.db import models

from lats.models import Lat, UintField


class MetricSnapshot(models.Model):
    lat = models.ForeignKey(Lat, on_delete=models.CASCADE, related_name="snapshots")
    timestamp = models.DateTimeField()
    block_number = models.PositiveBigIntegerField(default=0)
    total_assets = UintField()
    total_supply = UintField()
    # Null while the unit of account's ETH price is unknown (no price feed yet).
    total_tvl_eth = models.DecimalField(max_digits=40, decimal_places=18, default=0, null=True)
    staked_tvl_eth = models.DecimalField(max_digits=40, decimal_places=18, default=0, null=True)
    unstaked_tvl_eth = models.DecimalField(max_digits=40, decimal_places=18, default=0, null=True)
    # Null where the chain's RewardsCoordinator is unknown (no preset, manifest or override).
    apy = models.DecimalField(max_digits=20, decimal_places=8, default=0, null=True)
    base_apy = models.DecimalField(max_digits=20, decimal_places=8, default=0)
    native_apy = models.DecimalField(max_digits=20, decimal_places=8, default=0)
    total_apy = models.DecimalField(max_digits=20, decimal_places=8, default=0, null=True)
    total_users = models.PositiveBigIntegerField(
        default=0, help_text="Holders: addresses with a LAT balance above zero at the snapshot."
    )
    ever_holders = models.PositiveBigIntegerField(
        default=0, help_text="Addresses that have held the LAT at any time up to the snapshot."
    )

    class Meta:
        ordering = ("lat_id", "timestamp")
        constraints = [
            models.UniqueConstraint(fields=("lat", "timestamp"), name="snapshot_lat_ts_uniq"),
        ]

    def __str__(self) -> str:
        return f"{self.lat.symbol} @ {self.timestamp:%Y-%m-%d %H:%M}"


class RewardSubmission(models.Model):
    """An AVSRewardsSubmissionCreated event: rewards an AVS submitted to strategies, paid out
    evenly over [start, start + duration]."""

    avs = models.ForeignKey("lats.Avs", on_delete=models.CASCADE, related_name="reward_submissions")
    chain_id = models.PositiveBigIntegerField()
    tx_hash = models.CharField(max_length=66)
    log_index = models.PositiveIntegerField()
    block_number = models.PositiveBigIntegerField()
    block_hash = models.CharField(max_length=66, blank=True, default="")
    token = models.CharField(max_length=42)
    amount = UintField()
    start_timestamp = models.PositiveBigIntegerField()
    duration = models.PositiveBigIntegerField()
    strategies = models.JSONField(default=list, help_text="Strategy addresses, checksummed.")

    class Meta:
        ordering = ("avs_id", "block_number", "log_index")
        indexes = [
            models.Index(fields=("avs", "block_number"), name="reward_avs_block_idx"),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=("chain_id", "tx_hash", "log_index"), name="reward_tx_log_uniq"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.amount} of {self.token} to {self.avs}"


class RewardsCheckpoint(models.Model):
    """How far the rewards submissions of one AVS have been read, the hash of that block, and
    the block taken as final (as DepositCheckpoint; activity/indexing.py)."""

    avs = models.OneToOneField(
        "lats.Avs", on_delete=models.CASCADE, related_name="rewards_checkpoint"
    )
    block_number = models.PositiveBigIntegerField()
    block_hash = models.CharField(max_length=66, blank=True, default="")
    final_block = models.PositiveBigIntegerField(null=True, blank=True)
    final_hash = models.CharField(max_length=66, blank=True, default="")

    def __str__(self) -> str:
        return f"{self.avs} @ {self.block_number}"
