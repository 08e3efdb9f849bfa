"""Point-in-time snapshots of a LAT's aggregate metrics (its history), and what its rewards APY
and rates are computed from: its AVS's events (rewards submissions, operators' registrations and
splits), each UTC day's state of the AVS and of the LAT, and the LAT's hourly exchange rate."""

from __future__ import annotations

from django.db import models

from lats.models import AddressField, Lat, UintField


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
    """A rewards submission of an AVS the rewards APY counts (decisions.md): an
    AVSRewardsSubmissionCreated (`avs`: `amount` paid to the stakers of every registered
    operator) or an OperatorDirectedAVSRewardsSubmissionCreated (`operatorDirected`: each
    operator's amount in `operator_amounts`), paid over [start, start + duration)."""

    class Kind(models.TextChoices):
        AVS = "avs", "AVS rewards"
        OPERATOR_DIRECTED = "operatorDirected", "operator-directed rewards"

    avs = models.ForeignKey("lats.Avs", on_delete=models.CASCADE, related_name="reward_submissions")
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.AVS)
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
    multipliers = models.JSONField(
        default=list, help_text="Each strategy's multiplier (decimal strings), in its order."
    )
    operator_amounts = models.JSONField(
        default=dict, blank=True, help_text="Operator-directed: each operator's amount."
    )

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
    """How far the events of one AVS have been read (its submissions and `AvsEvent`s), the hash
    of that block, and the block taken as final (as DepositCheckpoint; activity/indexing.py).
    `origin` is the first block read: where the RewardsCoordinator or the AVSDirectory got code."""

    avs = models.OneToOneField(
        "lats.Avs", on_delete=models.CASCADE, related_name="rewards_checkpoint"
    )
    origin = models.PositiveBigIntegerField(default=0)
    block_number = models.PositiveBigIntegerField()
    block_hash = models.CharField(max_length=66, blank=True, default="")
    final_block = models.PositiveBigIntegerField(null=True, blank=True)
    final_hash = models.CharField(max_length=66, blank=True, default="")

    def __str__(self) -> str:
        return f"{self.avs} @ {self.block_number}"


class AvsEvent(models.Model):
    """An event of an AVS's rewards other than a counted submission: an operator's
    registration (`value` 1) or deregistration (0), an operator's split for the AVS (`value`
    bips, effective from the UTC day after `activated_at`), a change of the coordinator's
    default split, or a kind of rewards submission the APY does not count (`name`)."""

    class Kind(models.TextChoices):
        REGISTRATION = "registration"
        SPLIT = "split"
        DEFAULT_SPLIT = "defaultSplit"
        NOTICED = "noticed"

    avs = models.ForeignKey("lats.Avs", on_delete=models.CASCADE, related_name="events")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    name = models.CharField(max_length=64, help_text="The event's name.")
    chain_id = models.PositiveBigIntegerField()
    tx_hash = models.CharField(max_length=66)
    log_index = models.PositiveIntegerField()
    block_number = models.PositiveBigIntegerField()
    block_hash = models.CharField(max_length=66)
    block_timestamp = models.PositiveBigIntegerField()
    operator = AddressField(blank=True, default="")
    value = models.PositiveIntegerField(default=0)
    activated_at = models.PositiveBigIntegerField(default=0)
    data = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ("avs_id", "block_number", "log_index")
        indexes = [models.Index(fields=("avs", "kind", "block_number"), name="avsevent_kind_idx")]
        constraints = [
            models.UniqueConstraint(
                fields=("avs", "tx_hash", "log_index"), name="avsevent_avs_tx_log_uniq"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} of {self.avs} @ {self.block_number}"


class AvsDay(models.Model):
    """An AVS on one UTC day: the state at the last block before the day began (`block`), of
    the operators registered to it for the whole day (`operators` of them): their delegated
    shares summed per strategy (`totals`; only the strategies each operator restakes where the
    AVS's ServiceManager says which), and the coordinator's default split."""

    avs = models.ForeignKey("lats.Avs", on_delete=models.CASCADE, related_name="days")
    day = models.DateField()
    block_number = models.PositiveBigIntegerField()
    block_hash = models.CharField(max_length=66)
    strategies = models.JSONField(default=list, help_text="The strategies read.")
    totals = models.JSONField(default=dict, help_text="strategy -> shares (decimal string).")
    operators = models.PositiveIntegerField(default=0, help_text="Operators registered all day.")
    default_split = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        ordering = ("avs_id", "day")
        constraints = [models.UniqueConstraint(fields=("avs", "day"), name="avsday_avs_day_uniq")]

    def __str__(self) -> str:
        return f"{self.avs} on {self.day}"


class LatDay(models.Model):
    """A LAT on one UTC day, in the state at the last block before the day began: its totals and
    TVL in ETH (null while unknown), its delegated nodes' shares (`nodes`: [operator, {strategy:
    shares}]), its nodes' operators' own delegated shares and restaked strategies (`operators`),
    and the ETH price of one raw unit of each token it holds or is paid in (`prices`; null where
    it cannot be valued)."""

    lat = models.ForeignKey(Lat, on_delete=models.CASCADE, related_name="days")
    day = models.DateField()
    block_number = models.PositiveBigIntegerField()
    block_hash = models.CharField(max_length=66)
    total_assets = UintField()
    total_supply = UintField()
    tvl_eth = models.DecimalField(max_digits=40, decimal_places=18, null=True, blank=True)
    strategies = models.JSONField(default=list, help_text="The strategies read.")
    nodes = models.JSONField(default=list)
    operators = models.JSONField(default=dict)
    prices = models.JSONField(default=dict)

    class Meta:
        ordering = ("lat_id", "day")
        constraints = [models.UniqueConstraint(fields=("lat", "day"), name="latday_lat_day_uniq")]

    def __str__(self) -> str:
        return f"{self.lat.symbol} on {self.day}"


class RatePoint(models.Model):
    """The LAT's totals at the last block of one UTC hour (`hour` is the hour's start): its
    exchange rate then. A day's point is its last hour's."""

    lat = models.ForeignKey(Lat, on_delete=models.CASCADE, related_name="rate_points")
    hour = models.DateTimeField()
    block_number = models.PositiveBigIntegerField()
    total_assets = UintField()
    total_supply = UintField()

    class Meta:
        ordering = ("lat_id", "hour")
        constraints = [models.UniqueConstraint(fields=("lat", "hour"), name="ratepoint_uniq")]

    def __str__(self) -> str:
        return f"{self.lat.symbol} @ {self.hour:%Y-%m-%d %H:00}"


class UsdPrice(models.Model):
    """ETH's price in USD on a chain, from its ETH/USD feed (`/yields`' tvlUsd)."""

    chain_id = models.PositiveBigIntegerField(unique=True)
    feed_address = AddressField()
    answer = UintField()
    decimals = models.PositiveSmallIntegerField()
    block_number = models.PositiveBigIntegerField()
    updated_at = models.DateTimeField()

    class Meta:
        verbose_name = "ETH/USD price"

    def __str__(self) -> str:
        return f"ETH/USD on chain {self.chain_id}"
