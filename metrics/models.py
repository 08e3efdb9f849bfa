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
    total_tvl_eth = models.DecimalField(max_digits=40, decimal_places=18, default=0)
    staked_tvl_eth = models.DecimalField(max_digits=40, decimal_places=18, default=0)
    unstaked_tvl_eth = models.DecimalField(max_digits=40, decimal_places=18, default=0)
    apy = models.DecimalField(max_digits=20, decimal_places=8, default=0)
    base_apy = models.DecimalField(max_digits=20, decimal_places=8, default=0)
    native_apy = models.DecimalField(max_digits=20, decimal_places=8, default=0)
    total_apy = models.DecimalField(max_digits=20, decimal_places=8, default=0)
    total_users = models.PositiveBigIntegerField(default=0, help_text="Distinct depositors so far.")

    class Meta:
        ordering = ("lat_id", "timestamp")
        constraints = [
            models.UniqueConstraint(fields=("lat", "timestamp"), name="snapshot_lat_ts_uniq"),
        ]

    def __str__(self) -> str:
        return f"{self.lat.symbol} @ {self.timestamp:%Y-%m-%d %H:%M}"
