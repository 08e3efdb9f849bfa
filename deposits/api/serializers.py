from __future__ import annotations

from rest_framework import serializers

from latsite.api.fields import AddressOutField, UintStringField


class DepositSerializer(serializers.Serializer):
    sender = AddressOutField()
    receiver = AddressOutField()
    asset = AddressOutField()
    liquidTokenAddress = AddressOutField(source="lat.proxy_address")
    amount = UintStringField(help_text="Deposited amount, token units.")
    shares = UintStringField(help_text="LAT shares minted, 1e18 units.")
    createdAtBlock = serializers.IntegerField(source="block_number", read_only=True)
    createdAt = serializers.DateTimeField(source="created_at", read_only=True)


class DepositMetaSerializer(serializers.Serializer):
    total = serializers.IntegerField(help_text="Deposits matching the filters.")
    skip = serializers.IntegerField()
    take = serializers.IntegerField()


class DepositListSerializer(serializers.Serializer):
    data = DepositSerializer(many=True, read_only=True)
    meta = DepositMetaSerializer(read_only=True)
