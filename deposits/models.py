"""What happens on a LAT, as indexed from its contracts' events: deposits, the activity feed
and the holders' balances."""

from __future__ import annotations

from django.db import models

from lats.models import AddressField, Lat, UintField


class Deposit(models.Model):
    """One AssetDeposited (or legacy Deposit) event.

    The listing's order is the natural key, newest first: block number, then log index, then
    chain id. Rows are never renumbered: a backfill of old history or another chain only adds
    rows, and counts them in `DepositCount` and `DepositSpan`, which give the listing its
    totals and its deep pages without a COUNT or an OFFSET over the table.
    """

    class Kind(models.TextChoices):
        ASSET_DEPOSITED = "AssetDeposited"
        DEPOSIT = "Deposit"

    # No index of its own: the (lat, key) index leads with it.
    lat = models.ForeignKey(Lat, on_delete=models.CASCADE, related_name="deposits", db_index=False)
    chain_id = models.PositiveBigIntegerField()
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
        ordering = ("-block_number", "-log_index", "-chain_id")
        constraints = [
            models.UniqueConstraint(
                fields=("chain_id", "tx_hash", "log_index"), name="deposit_tx_log_uniq"
            ),
        ]
        # Every listing walks one of these backwards from a key (keyset paging): the filter's
        # column, then the listing key.
        indexes = [
            models.Index(fields=("block_number", "log_index", "chain_id"), name="deposit_key_idx"),
            models.Index(
                fields=("lat", "block_number", "log_index", "chain_id"), name="deposit_lat_key_idx"
            ),
            models.Index(
                fields=("sender", "block_number", "log_index", "chain_id"),
                name="deposit_sender_key_idx",
            ),
            models.Index(
                fields=("receiver", "block_number", "log_index", "chain_id"),
                name="deposit_receiver_key_idx",
            ),
            models.Index(
                fields=("asset", "block_number", "log_index", "chain_id"),
                name="deposit_asset_key_idx",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.tx_hash}:{self.log_index}"


class DepositCount(models.Model):
    """How many deposits of a LAT the listing has for one filter: every deposit of the LAT
    (`field` and `address` empty), or those of one sender, receiver or asset. Kept by the
    indexer in the transaction that adds or removes the deposits; `meta.total` sums a few rows
    (one per LAT) instead of counting deposits."""

    class Field(models.TextChoices):
        ALL = "", "every deposit"
        SENDER = "sender"
        RECEIVER = "receiver"
        ASSET = "asset"

    lat = models.ForeignKey(Lat, on_delete=models.CASCADE, related_name="deposit_counts")
    field = models.CharField(max_length=8, choices=Field.choices, blank=True)
    address = models.CharField(max_length=42, blank=True, help_text="Checksummed, or empty.")
    n = models.PositiveBigIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=("field", "address", "lat"), name="deposit_count_uniq"),
        ]

    def __str__(self) -> str:
        return f"{self.lat_id} {self.field or 'all'} {self.address}: {self.n}"


class DepositSpan(models.Model):
    """How many deposits of a LAT lie in one span of SPAN_BLOCKS block numbers (span =
    block_number // SPAN_BLOCKS). A page at any `skip` finds its span from the running sum of
    these counts, newest span first, then walks at most one span's deposits of the listing's
    index (deposits/selectors.py)."""

    SPAN_BLOCKS = 4096

    lat = models.ForeignKey(Lat, on_delete=models.CASCADE, related_name="deposit_spans")
    span = models.PositiveBigIntegerField()
    n = models.PositiveBigIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=("span", "lat"), name="deposit_span_uniq"),
        ]

    def __str__(self) -> str:
        return f"{self.lat_id} span {self.span}: {self.n}"


class DepositSpanTotal(models.Model):
    """DepositSpan summed over every LAT, kept with it: the unfiltered listing's deep pages
    walk these rows newest span first, without grouping the LATs' rows per request."""

    span = models.PositiveBigIntegerField(unique=True)
    n = models.PositiveBigIntegerField(default=0)

    def __str__(self) -> str:
        return f"span {self.span}: {self.n}"


class DepositCheckpoint(models.Model):
    """How far the event indexer (deposits, the activity feed, holders) has got for one LAT,
    and the hash and time of that block; and the block REORG_MAX_DEPTH below it, taken as
    final (activity/indexing.py): a reorg that reaches it stops indexing instead of deleting
    history."""

    lat = models.OneToOneField(Lat, on_delete=models.CASCADE, related_name="deposit_checkpoint")
    block_number = models.PositiveBigIntegerField()
    block_hash = models.CharField(max_length=66)
    final_block = models.PositiveBigIntegerField(null=True, blank=True)
    final_hash = models.CharField(max_length=66, blank=True, default="")
    block_time = models.DateTimeField(null=True, blank=True, help_text="`block_number`'s time.")
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.lat.symbol} @ {self.block_number}"


class Event(models.Model):
    """One log of a LAT's contracts from extensions.md's table, in the form the activity feed
    serves it. Mints and burns (`Transfer` from or to the zero address) are kept too, with the
    types `mint` and `burn`: they move balances and roll back with them, but are not in the
    feed."""

    class Type(models.TextChoices):
        DEPOSIT = "deposit"
        TRANSFER = "transfer"
        PAUSED = "paused"
        UNPAUSED = "unpaused"
        TOKEN_ADDED = "tokenAdded"
        TOKEN_REMOVED = "tokenRemoved"
        PRICE_UPDATED = "priceUpdated"
        NODE_DELEGATED = "nodeDelegated"
        ASSETS_STAKED = "assetsStaked"
        NODE_CREATED = "nodeCreated"
        PRICES_REFRESHED = "pricesRefreshed"
        ASSETS_TRANSFERRED = "assetsTransferred"
        ASSETS_DEPOSITED_TO_EIGENLAYER = "assetsDepositedToEigenlayer"
        VOLATILITY_THRESHOLD_UPDATED = "volatilityThresholdUpdated"
        MAX_NODES_UPDATED = "maxNodesUpdated"
        NODE_IMPLEMENTATION_CHANGED = "nodeImplementationChanged"
        NODE_UNDELEGATED = "nodeUndelegated"
        NODE_ASSET_DEPOSITED = "nodeAssetDeposited"
        TOKEN_RATE_UPDATED = "tokenRateUpdated"
        GLOBAL_PRICES_UPDATED = "globalPricesUpdated"
        UPGRADED = "upgraded"
        MINT = "mint"
        BURN = "burn"

    # No index of its own: the unique (lat, block_number, log_index) leads with it.
    lat = models.ForeignKey(Lat, on_delete=models.CASCADE, related_name="events", db_index=False)
    block_number = models.PositiveBigIntegerField()
    log_index = models.PositiveIntegerField()
    tx_hash = models.CharField(max_length=66)
    block_hash = models.CharField(max_length=66)
    created_at = models.DateTimeField(help_text="The block's timestamp.")
    type = models.CharField(max_length=32, choices=Type.choices)
    args = models.JSONField(default=dict)

    class Meta:
        ordering = ("-block_number", "-log_index")
        constraints = [
            models.UniqueConstraint(
                fields=("lat", "block_number", "log_index"), name="event_lat_log_uniq"
            ),
        ]
        # The unique key serves the feed unfiltered (walked backwards); an index per row costs
        # the indexer its share of every write.
        indexes = [
            models.Index(
                fields=("lat", "type", "-block_number", "-log_index"), name="event_lat_type_idx"
            ),
            models.Index(fields=("tx_hash",), name="event_tx_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.type} {self.tx_hash}:{self.log_index}"


class Holder(models.Model):
    """A LAT balance, kept exactly from the LAT's `Transfer` events. A row stays once its
    balance is back to zero: it records that the address held the LAT once (`first_block`)."""

    # No index of its own: the unique (lat, address) leads with it.
    lat = models.ForeignKey(Lat, on_delete=models.CASCADE, related_name="holders", db_index=False)
    # Lower-case hex: the listing's tie-break is lower-case hex order (served checksummed).
    address = models.CharField(max_length=42)
    balance = UintField()
    first_block = models.PositiveBigIntegerField(help_text="Block of the first credit.")

    class Meta:
        ordering = ("-balance", "address")
        constraints = [
            models.UniqueConstraint(fields=("lat", "address"), name="holder_lat_address_uniq"),
        ]
        indexes = [
            models.Index(
                fields=("lat", "-balance", "address"),
                condition=models.Q(balance__gt=0),
                name="holder_rank_idx",
            ),
            models.Index(fields=("address",), name="holder_address_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.address} {self.balance}"


class HolderTally(models.Model):
    """How many addresses hold the LAT now, and how many ever did, as of the indexed block:
    the holders' `meta.total` and the historical points' `totalUsers` without a count."""

    lat = models.OneToOneField(Lat, on_delete=models.CASCADE, related_name="holder_tally")
    holders = models.PositiveBigIntegerField(default=0)
    ever = models.PositiveBigIntegerField(default=0)

    def __str__(self) -> str:
        return f"{self.lat_id}: {self.holders} holders"


# The holders' rank buckets. A balance above zero keeps its HOLDER_BUCKET_BITS + 1 leading
# binary digits (the mantissa, 16..31 for 4 bits) and the count of those it drops (the shift):
# its bucket's key is shift * 16 + mantissa, and the bucket holds the balances from
# mantissa << shift up to, not including, (mantissa + 1) << shift. Balances below 32 are their
# own bucket (shift 0, keys 1..31). The key grows with the balance, so the buckets in key order
# are the holders in balance order; a bucket spans at most 1/16 of its lowest balance, and a
# uint256 balance has one of 31 + 16 * 251 = 4,047 keys.
HOLDER_BUCKET_BITS = 4
_LEAD = 1 << HOLDER_BUCKET_BITS


def holder_bucket(balance: int) -> int:
    """The rank bucket's key of a balance above zero."""
    shift = max(0, balance.bit_length() - HOLDER_BUCKET_BITS - 1)
    return shift * _LEAD + (balance >> shift)


def holder_bucket_floors() -> list[int]:
    """The lowest balance of each bucket, in key order from key 1: `width_bucket(balance,
    floors)` in PostgreSQL is a balance's key (the migration and bulk fills use it)."""
    floors = list(range(1, 2 * _LEAD))
    for shift in range(1, 256 - HOLDER_BUCKET_BITS):
        floors += [m << shift for m in range(_LEAD, 2 * _LEAD)]
    return floors


class HolderBucket(models.Model):
    """How many holders (balance above zero) a LAT has in one balance range (see
    holder_bucket), kept by the indexer in the transaction that moves the balances, and moved
    back with them on a reorg. A bucket that empties is deleted.

    A page of the holders at any depth is then two index lookups: the LAT's buckets from the
    highest key down with a running sum of their counts find the bucket where the page starts
    and how many holders rank above it; the holders' rank index is read from that bucket's
    upper balance down with an OFFSET of the holders before the page inside the bucket. The
    worst case is many holders whose balances share one bucket (equal balances, e.g. an
    airdrop of one amount): that OFFSET walks up to the bucket's count."""

    # Indexed by the unique (lat, key) constraint, which the pages scan.
    lat = models.ForeignKey(
        Lat, on_delete=models.CASCADE, related_name="holder_buckets", db_index=False
    )
    key = models.PositiveSmallIntegerField(help_text="holder_bucket of the balances counted.")
    # Signed: an upsert's proposed row carries the (maybe negative) change.
    holders = models.IntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=("lat", "key"), name="holder_bucket_uniq"),
        ]

    def __str__(self) -> str:
        return f"{self.lat_id}: {self.holders} in bucket {self.key}"
