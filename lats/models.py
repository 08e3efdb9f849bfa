"""LATs, their tokens, the AVSs they secure, fee structures and price feeds."""

from __future__ import annotations

from decimal import Decimal

from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from core.addresses import ADDRESS_VALIDATOR, is_beacon_chain_eth
from core.history import History
from lats.networks import READ_FROM_MANAGER, eigenlayer_preset


def AddressField(**kwargs) -> models.CharField:
    """An EIP-55 checksummed address, stored as written by the services."""
    kwargs.setdefault("max_length", 42)
    kwargs.setdefault("validators", [ADDRESS_VALIDATOR])
    return models.CharField(**kwargs)


class UintField(models.DecimalField):
    """A raw on-chain uint256: NUMERIC(78, 0) in PostgreSQL.

    SQLite would store a number this large as a REAL and lose digits, so there it is TEXT,
    converted back to an exact Decimal on the way out.
    """

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("max_digits", 78)
        kwargs.setdefault("decimal_places", 0)
        kwargs.setdefault("default", 0)
        super().__init__(*args, **kwargs)

    def deconstruct(self):
        name, path, args, kwargs = super().deconstruct()
        for key, value in (("max_digits", 78), ("decimal_places", 0), ("default", 0)):
            if kwargs.get(key) == value:
                kwargs.pop(key)
        return name, path, args, kwargs

    def get_internal_type(self) -> str:
        return "UintField"

    def db_type(self, connection) -> str:
        return "text" if connection.vendor == "sqlite" else "numeric(78, 0)"

    def get_db_prep_value(self, value, connection, prepared=False):
        if value is None or hasattr(value, "as_sql"):
            return value
        value = self.to_python(value)
        return str(int(value)) if connection.vendor == "sqlite" else value

    def from_db_value(self, value, expression, connection):
        return None if value is None else Decimal(value)


class Avs(models.Model):
    """An AVS, with the metadata staff curate (seeded from its AVSMetadataURIUpdated document)."""

    CURATED_FIELDS = (
        "metadata_name",
        "metadata_description",
        "metadata_community_chat",
        "metadata_logo",
        "metadata_messaging",
        "metadata_website",
        "metadata_social",
        "metadata_code",
        "metadata_token_address",
        "tags",
    )

    chain_id = models.PositiveBigIntegerField()
    address = AddressField()
    metadata_uri = models.TextField(blank=True, default="")
    metadata_name = models.CharField(max_length=200, null=True, blank=True)
    metadata_description = models.TextField(null=True, blank=True)
    metadata_community_chat = models.URLField(max_length=500, null=True, blank=True)
    metadata_logo = models.URLField(max_length=500, null=True, blank=True)
    metadata_messaging = models.URLField(max_length=500, null=True, blank=True)
    metadata_website = models.URLField(max_length=500, null=True, blank=True)
    metadata_social = models.URLField(max_length=500, null=True, blank=True)
    metadata_code = models.URLField(max_length=500, null=True, blank=True)
    metadata_token_address = AddressField(null=True, blank=True)
    tags = models.JSONField(default=list, blank=True)
    # Curated fields a staff member has edited: the metadata refresh never overwrites them.
    staff_edited_fields = models.JSONField(default=list, blank=True, editable=False)
    metadata_updated_block = models.PositiveBigIntegerField(null=True, blank=True, editable=False)
    # Who changed the curated metadata and when (staff in admin; the metadata refresh as no one).
    history = History()

    class Meta:
        verbose_name = "AVS"
        verbose_name_plural = "AVSs"
        ordering = ("chain_id", "address")
        constraints = [
            models.UniqueConstraint(fields=("chain_id", "address"), name="avs_chain_address_uniq"),
        ]
        indexes = [models.Index(fields=("address",), name="avs_address_idx")]

    def __str__(self) -> str:
        return self.metadata_name or self.address


class Token(models.Model):
    """An ERC-20 token some LAT supports."""

    chain_id = models.PositiveBigIntegerField()
    address = AddressField()
    symbol = models.CharField(max_length=64)
    name = models.CharField(max_length=200)
    decimals = models.PositiveSmallIntegerField(validators=[MaxValueValidator(77)])
    ref_id = models.PositiveBigIntegerField(
        default=0, help_text="External market-data identifier (refId); 0 when none."
    )
    base_apy = models.DecimalField(
        max_digits=12,
        decimal_places=6,
        default=0,
        help_text="Staking yield of the token itself, percent a year (feeds baseApy).",
    )
    # Who changed the base yield (or the refId) and when; the state refresh rarely writes here
    # (only when the chain renames a token).
    history = History()

    class Meta:
        ordering = ("chain_id", "address")
        constraints = [
            models.UniqueConstraint(
                fields=("chain_id", "address"), name="token_chain_address_uniq"
            ),
        ]
        indexes = [models.Index(fields=("address",), name="token_address_idx")]

    def __str__(self) -> str:
        return f"{self.symbol} ({self.address})"


class Lat(models.Model):
    """A Liquid AVS Token deployment and the state last read from its contracts."""

    class Group(models.TextChoices):
        ETH = "ETH", "ETH"
        BTC = "BTC", "BTC"
        NATIVE = "Native", "Native"

    chain_id = models.PositiveBigIntegerField()
    proxy_address = AddressField(unique=True)
    implementation_address = AddressField()
    name = models.CharField(max_length=200)
    symbol = models.CharField(max_length=64)
    avs = models.ForeignKey(Avs, on_delete=models.PROTECT, related_name="lats")
    base_asset = AddressField(
        help_text="Unit of account: the beacon-chain pseudo-address or a token."
    )
    base_asset_symbol = models.CharField(max_length=64, blank=True, default="")
    max_nodes = models.PositiveIntegerField(default=0)
    deployment_block = models.PositiveBigIntegerField(default=0)
    contract_deployments = models.JSONField(
        default=dict, help_text='{"implementation": {name: address}, "proxy": {name: address}}'
    )
    # The manifest as last imported, every member kept (unknown ones too), and the version
    # folder it came from in a deployments repository ("" for a single file).
    manifest = models.JSONField(default=dict, blank=True, editable=False)
    manifest_version = models.CharField(max_length=64, blank=True, default="", editable=False)
    # EigenLayer core contracts of the chain: the manifest's `eigenlayer` member or staff's
    # override; blank falls back to the network's preset (lats/networks.py), then, for the
    # DelegationManager and StrategyManager, to what the LiquidTokenManager names
    # (`eigenlayer_from_chain`, written by the state refresh). See `core_contract`.
    delegation_manager = AddressField(
        blank=True, default="", help_text="Blank: the network's preset, else the manager's."
    )
    strategy_manager = AddressField(
        blank=True, default="", help_text="Blank: the network's preset, else the manager's."
    )
    rewards_coordinator = AddressField(
        blank=True, default="", help_text="Blank: the network's preset."
    )
    avs_directory = AddressField(blank=True, default="", help_text="Blank: the network's preset.")
    allocation_manager = AddressField(
        blank=True, default="", help_text="Blank: the network's preset."
    )
    eigenlayer_from_chain = models.JSONField(default=dict, blank=True, editable=False)
    group_override = models.CharField(
        max_length=8,
        choices=Group.choices,
        blank=True,
        default="",
        help_text="Staff override of the token-type group; empty applies the rule.",
    )
    # State read at `state_block`.
    total_assets = UintField(help_text="totalAssets(), unit of account, 1e18-scaled.")
    total_supply = UintField()
    paused = models.BooleanField(default=False)
    # The price oracle's arePricesStale() and lastPriceUpdate(); null where it does not answer.
    prices_stale = models.BooleanField(null=True, blank=True)
    last_price_update = models.DateTimeField(null=True, blank=True)
    unit_eth_price = UintField(
        null=True,
        blank=True,
        default=None,
        help_text="ETH price of the unit of account, 1e18-scaled (1e18 for ETH LATs); null "
        "while unknown (a token without a price feed): the LAT's values in ETH are then null.",
    )
    apys = models.JSONField(default=dict, blank=True, editable=False)
    # What the rewards APY could not count, in words for ops (a token that cannot be valued, a
    # kind of submission not counted, an AVS without registrations), as the snapshot job last
    # found it (metrics); shown with the LAT's other gaps in admin and /health.
    apy_gaps = models.JSONField(default=list, blank=True, editable=False)
    # The price oracle the state refresh read last: the LAT's tokenRegistryOracle(), else (a
    # deployment without that view) the manifest's tokenRegistryOracle proxy; "" when none.
    price_oracle = AddressField(blank=True, default="", editable=False)
    # The functions chain.md names that this deployment lacks ("LiquidToken.tokenRegistryOracle()",
    # ...), as the state refresh last found them (lats/functions.py); the values they feed are
    # null. Shown on the sync status (admin) and in /health's gaps.
    missing_functions = models.JSONField(default=list, blank=True, editable=False)
    state_block = models.PositiveBigIntegerField(
        null=True, blank=True, editable=False, help_text="Block the stored state was read at."
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = "LAT"
        verbose_name_plural = "LATs"
        ordering = ("chain_id", "proxy_address")

    def __str__(self) -> str:
        return f"{self.symbol} ({self.proxy_address})"

    def proxy_of(self, contract: str) -> str:
        """The address of one of the LAT's proxied contracts (`liquidTokenManager`, ...)."""
        return self.contract_deployments.get("proxy", {})[contract]

    OVERRIDE_FIELDS = {
        "delegationManager": "delegation_manager",
        "strategyManager": "strategy_manager",
        "rewardsCoordinator": "rewards_coordinator",
        "avsDirectory": "avs_directory",
        "allocationManager": "allocation_manager",
    }

    @property
    def eigenlayer_preset(self) -> dict[str, str]:
        """The EigenLayer core contracts EigenLayer publishes for the LAT's chain ({} if none)."""
        return eigenlayer_preset(self.chain_id)

    def core_contract(self, name: str) -> str:
        """The EigenLayer core contract `name` (manifest spelling: `delegationManager`, ...):
        the manifest's or staff's override, else the network's preset, else (the
        DelegationManager and StrategyManager) what the LiquidTokenManager named at the last
        state refresh; "" where none is known."""
        override = getattr(self, self.OVERRIDE_FIELDS[name])
        if override:
            return override
        preset = self.eigenlayer_preset.get(name, "")
        if preset or name not in READ_FROM_MANAGER:
            return preset
        return str((self.eigenlayer_from_chain or {}).get(name, ""))

    @property
    def group(self) -> str:
        return self.group_of(
            base_asset=self.base_asset,
            base_asset_symbol=self.base_asset_symbol,
            group_override=self.group_override,
        )

    @classmethod
    def group_of(cls, *, base_asset: str, base_asset_symbol: str, group_override: str) -> str:
        """Token-type group: staff override, else the rule of decisions.md."""
        if group_override:
            return group_override
        if is_beacon_chain_eth(base_asset):
            return cls.Group.ETH
        if "BTC" in base_asset_symbol.upper():
            return cls.Group.BTC
        return cls.Group.NATIVE


class LatToken(models.Model):
    """A token a LAT supports, with what the LiquidTokenManager says of it."""

    lat = models.ForeignKey(Lat, on_delete=models.CASCADE, related_name="lat_tokens")
    token = models.ForeignKey(Token, on_delete=models.PROTECT, related_name="lat_links")
    strategy_address = AddressField()
    volatility_threshold = UintField()
    price_per_unit = UintField()
    decimals = models.PositiveSmallIntegerField()
    balance = UintField(help_text="balanceAssets: unstaked amount the LAT holds.")
    queued_balance = UintField(help_text="balanceQueuedAssets: queued amount.")
    staked_amount = UintField(
        editable=False,
        help_text=(
            "What the LAT's staker nodes stake of the token: the sum of their assets' "
            "staked_amount, kept in step by operators.services.store_lat_staked on every write "
            "of a node or its assets (the LAT detail reads it with the LAT, without summing)."
        ),
    )

    class Meta:
        verbose_name = "LAT token"
        ordering = ("lat_id", "token__address")
        constraints = [
            models.UniqueConstraint(fields=("lat", "token"), name="lattoken_lat_token_uniq"),
        ]

    def __str__(self) -> str:
        return f"{self.lat.symbol}/{self.token.symbol}"


class FeeStructure(models.Model):
    """Fees staff set per LAT (percent)."""

    lat = models.OneToOneField(Lat, on_delete=models.CASCADE, related_name="fee_structure")
    management_fee = models.DecimalField(
        max_digits=7,
        decimal_places=4,
        default=0,
        validators=[MinValueValidator(0), MaxValueValidator(100)],
    )
    performance_fee = models.DecimalField(
        max_digits=7,
        decimal_places=4,
        default=0,
        validators=[MinValueValidator(0), MaxValueValidator(100)],
    )
    history = History()

    def __str__(self) -> str:
        return f"Fees of {self.lat.symbol}"


class PriceFeed(models.Model):
    """A Chainlink-style feed giving a token's price in ETH, and its last answer."""

    chain_id = models.PositiveBigIntegerField()
    token_address = AddressField()
    feed_address = AddressField()
    decimals = models.PositiveSmallIntegerField(default=18)
    answer = UintField()
    updated_at = models.DateTimeField(null=True, blank=True)
    # Who pointed a token at which feed and when. The answer the state refresh reads every minute
    # is not history: a save of only those fields records no row (see core/history.py).
    history = History(excluded_fields=["answer", "decimals", "updated_at"])

    class Meta:
        ordering = ("chain_id", "token_address")
        constraints = [
            models.UniqueConstraint(
                fields=("chain_id", "token_address"), name="pricefeed_chain_token_uniq"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.token_address} -> {self.feed_address}"


class SyncStatus(models.Model):
    """How the last run of one refresh job went for one LAT (shown to ops in admin)."""

    class Job(models.TextChoices):
        STATE = "state", "LAT state, nodes and operators"
        DEPOSITS = "deposits", "Deposits"
        METADATA = "metadata", "AVS metadata"
        SNAPSHOT = "snapshot", "AVS rewards and metric snapshot"

    lat = models.ForeignKey(Lat, on_delete=models.CASCADE, related_name="sync_statuses")
    job = models.CharField(max_length=16, choices=Job.choices)
    last_success_at = models.DateTimeField(null=True, blank=True)
    last_block = models.PositiveBigIntegerField(null=True, blank=True)
    last_error = models.TextField(blank=True, default="")
    last_error_at = models.DateTimeField(null=True, blank=True)
    consecutive_failures = models.PositiveIntegerField(default=0)

    class Meta:
        verbose_name = "sync status"
        verbose_name_plural = "sync statuses"
        ordering = ("lat_id", "job")
        constraints = [
            models.UniqueConstraint(fields=("lat", "job"), name="syncstatus_lat_job_uniq"),
        ]

    def __str__(self) -> str:
        return f"{self.lat.symbol} {self.job}"


class ChainHead(models.Model):
    """The newest confirmed head (CHAIN_CONFIRMATIONS behind the node's) that an indexing run
    of the chain has seen: the `chainHead` of a LAT's status."""

    chain_id = models.PositiveBigIntegerField(unique=True)
    block_number = models.PositiveBigIntegerField()
    block_hash = models.CharField(max_length=66)
    block_time = models.DateTimeField()
    seen_at = models.DateTimeField()

    class Meta:
        ordering = ("chain_id",)

    def __str__(self) -> str:
        return f"chain {self.chain_id} @ {self.block_number}"


class ImplementationFunctions(models.Model):
    """Which of the functions the state refresh calls an implementation lacks, detected once per
    (chain, implementation address) and reused by every LAT whose proxy points at it; a proxy
    upgraded to another implementation is detected again (lats/functions.py)."""

    chain_id = models.PositiveBigIntegerField()
    implementation = AddressField()
    contract = models.CharField(max_length=64, help_text="LiquidToken, TokenRegistryOracle, ...")
    # The probed functions' signatures, and those of them found missing.
    probed = models.JSONField(default=list)
    missing = models.JSONField(default=list)
    detected_at = models.DateTimeField(auto_now_add=True)
    detected_block = models.PositiveBigIntegerField()

    class Meta:
        verbose_name = "implementation's functions"
        verbose_name_plural = "implementations' functions"
        ordering = ("chain_id", "implementation", "contract")
        constraints = [
            models.UniqueConstraint(
                fields=("chain_id", "implementation", "contract"),
                name="implfunctions_chain_impl_contract_uniq",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.contract} at {self.implementation}"
