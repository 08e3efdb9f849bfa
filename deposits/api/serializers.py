from __future__ import annotations

from rest_framework import serializers

from core.api.fields import AddressOutField, UintStringField


class DepositSerializer(serializers.Serializer):
    sender = AddressOutField()
    receiver = AddressOutField()
    asset = AddressOutField()
    liquidTokenAddress = AddressOutField(source="lat.proxy_address")
    amount = UintStringField(help_text="Deposited amount, token units.")
    shares = UintStringField(help_text="LAT shares minted, 1e18 units.")
    createdAtBlock = serializers.IntegerField(source="block_number", read_only=True)
    createdAt = serializers.DateTimeField(source="created_at", read_only=True)
    transactionHash = serializers.RegexField(
        r"^0x[0-9a-fA-F]{64}$",
        source="tx_hash",
        read_only=True,
        help_text="Hash of the transaction that made the deposit.",
    )
    logIndex = serializers.IntegerField(
        source="log_index",
        read_only=True,
        min_value=0,
        help_text="Index of the deposit's event in its block; (chain, transaction, log index) "
        "identifies a deposit.",
    )


class DepositMetaSerializer(serializers.Serializer):
    total = serializers.IntegerField(help_text="Deposits matching the filters.")
    skip = serializers.IntegerField()
    take = serializers.IntegerField()
    next = serializers.CharField(
        allow_null=True,
        read_only=True,
        help_text="Cursor of the next page (pass it back as `cursor`), or null on the last page.",
    )


class DepositListSerializer(serializers.Serializer):
    # The envelope's field, not Serializer.data (DRF's metaclass takes it off the class).
    data = DepositSerializer(many=True, read_only=True)  # type: ignore[assignment]
    meta = DepositMetaSerializer(read_only=True)
