"""Operators, the staker nodes that delegate to them, and what each node holds."""

from __future__ import annotations

from django.db import models

from lats.models import AddressField, Avs, Lat, Token, UintField


class Operator(models.Model):
    """An EigenLayer operator some staker node delegates (or delegated) to."""

    chain_id = models.PositiveBigIntegerField()
    address = AddressField()
    metadata_name = models.CharField(max_length=200, blank=True, default="")
    metadata_description = models.TextField(blank=True, default="")
    metadata_community_chat = models.CharField(max_length=500, blank=True, default="")
    metadata_logo = models.CharField(max_length=500, blank=True, default="")
    metadata_messaging = models.CharField(max_length=500, blank=True, default="")
    metadata_website = models.CharField(max_length=500, blank=True, default="")
    metadata_social = models.CharField(max_length=500, blank=True, default="")
    metadata_uri = models.TextField(blank=True, default="")

    class Meta:
        ordering = ("chain_id", "address")
        constraints = [
            models.UniqueConstraint(
                fields=("chain_id", "address"), name="operator_chain_address_uniq"
            ),
        ]
        indexes = [models.Index(fields=("address",), name="operator_address_idx")]

    def __str__(self) -> str:
        return self.metadata_name or self.address


class OperatorAvsSplit(models.Model):
    """RewardsCoordinator.getOperatorAVSSplit(operator, avs), in bips."""

    operator = models.ForeignKey(Operator, on_delete=models.CASCADE, related_name="avs_splits")
    avs = models.ForeignKey(Avs, on_delete=models.CASCADE, related_name="operator_splits")
    split_bips = models.PositiveIntegerField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=("operator", "avs"), name="split_operator_avs_uniq"),
        ]

    def __str__(self) -> str:
        return f"{self.operator} / {self.avs}: {self.split_bips} bips"


class StakerNode(models.Model):
    """A staker node of a LAT and its current delegation."""

    lat = models.ForeignKey(Lat, on_delete=models.CASCADE, related_name="staker_nodes")
    address = AddressField()
    node_id = models.PositiveBigIntegerField()
    operator = models.ForeignKey(
        Operator, on_delete=models.PROTECT, null=True, blank=True, related_name="staker_nodes"
    )
    created_at_block = models.PositiveBigIntegerField()
    created_at = models.DateTimeField()
    updated_at_block = models.PositiveBigIntegerField()
    updated_at = models.DateTimeField()

    class Meta:
        ordering = ("lat_id", "node_id")
        constraints = [
            models.UniqueConstraint(fields=("lat", "node_id"), name="node_lat_id_uniq"),
            models.UniqueConstraint(fields=("lat", "address"), name="node_lat_address_uniq"),
        ]

    def __str__(self) -> str:
        return f"node {self.node_id} of {self.lat.symbol}"


class NodeAsset(models.Model):
    """What one staker node holds of one token, in its strategy."""

    node = models.ForeignKey(StakerNode, on_delete=models.CASCADE, related_name="assets")
    token = models.ForeignKey(Token, on_delete=models.PROTECT, related_name="node_assets")
    strategy_address = AddressField()
    core_shares = UintField(help_text="Withdrawable shares (getWithdrawableShares).")
    staked_amount = UintField(help_text="core_shares in token units (sharesToUnderlyingView).")

    class Meta:
        ordering = ("node_id", "token__address")
        constraints = [
            models.UniqueConstraint(fields=("node", "token"), name="nodeasset_node_token_uniq"),
        ]

    def __str__(self) -> str:
        return f"{self.token} in {self.node}"
