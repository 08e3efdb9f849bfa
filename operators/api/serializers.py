from __future__ import annotations

from rest_framework import serializers

from core.api.fields import AddressOutField, NumberField, UintStringField, number_map


class OperatorAssetSerializer(serializers.Serializer):
    asset = AddressOutField()
    strategy = AddressOutField()
    stakedAmount = UintStringField(help_text="Shares in token units.")
    coreShares = UintStringField(help_text="Withdrawable shares in the strategy.")


class NodeAssetOperatorSerializer(serializers.Serializer):
    """A node asset in the operator-asset shape."""

    asset = AddressOutField(source="token.address")
    strategy = AddressOutField(source="strategy_address")
    stakedAmount = UintStringField(source="staked_amount")
    coreShares = UintStringField(source="core_shares")


_NULL_ETH = (
    " Null where a LAT's unit of account has no known ETH price (no price feed yet) for some of it."
)


class OperatorTvlSerializer(serializers.Serializer):
    tvl = NumberField(allow_null=True, help_text="ETH." + _NULL_ETH)
    tvlStrategies = number_map(
        "tvl_strategies",
        "Strategy, named by its token's symbol, to the staked amount in whole tokens.",
    )
    tvlStrategiesEth = serializers.DictField(
        source="tvl_strategies_eth",
        child=NumberField(allow_null=True),
        read_only=True,
        help_text="Strategy, named by its token's symbol, to the staked value in ETH." + _NULL_ETH,
    )


class OperatorMetadataSerializer(serializers.Serializer):
    metadataName = serializers.CharField(source="metadata_name", read_only=True)
    metadataDescription = serializers.CharField(source="metadata_description", read_only=True)
    metadataCommunityChat = serializers.CharField(source="metadata_community_chat", read_only=True)
    metadataLogo = serializers.CharField(source="metadata_logo", read_only=True)
    metadataMessaging = serializers.CharField(source="metadata_messaging", read_only=True)
    metadataWebsite = serializers.CharField(source="metadata_website", read_only=True)
    metadataSocial = serializers.CharField(source="metadata_social", read_only=True)
    totalStakers = serializers.IntegerField(
        source="total_stakers",
        read_only=True,
        help_text="Staker nodes of all LATs currently delegated to this operator.",
    )
    tvl = NumberField(
        source="total_tvl", allow_null=True, help_text="ETH staked by those nodes." + _NULL_ETH
    )


class StakerNodeAssetsSerializer(serializers.Serializer):
    nodeAddress = AddressOutField(source="address")
    nodeId = serializers.IntegerField(source="node_id", read_only=True)
    assets = NodeAssetOperatorSerializer(source="assets.all", many=True, read_only=True)


class OperatorDetailSerializer(serializers.Serializer):
    operatorAddress = AddressOutField(source="address")
    metadata = OperatorMetadataSerializer(source="*", read_only=True)
    liquidTokens = serializers.ListField(
        source="liquid_tokens",
        child=AddressOutField(),
        read_only=True,
        help_text="Proxy addresses of the LATs delegating to this operator.",
    )
    stakerNodeAssets = StakerNodeAssetsSerializer(source="nodes", many=True, read_only=True)
    tvl = OperatorTvlSerializer(required=False, help_text="Present when withTvl=true.")

    def __init__(self, *args, with_tvl: bool = True, **kwargs):
        super().__init__(*args, **kwargs)
        if not with_tvl:
            self.fields.pop("tvl")


class OperatorDetailResponseSerializer(serializers.Serializer):
    # The envelope's field, not Serializer.data (DRF's metaclass takes it off the class).
    data = OperatorDetailSerializer(read_only=True)  # type: ignore[assignment]


class OperatorAddressListSerializer(serializers.Serializer):
    # The envelope's field, not Serializer.data (DRF's metaclass takes it off the class).
    data = serializers.ListField(child=AddressOutField(), read_only=True)  # type: ignore[assignment]


class LatOperatorSerializer(serializers.Serializer):
    operator = AddressOutField()
    allocations = OperatorAssetSerializer(
        many=True,
        read_only=True,
        help_text="Per asset, the sum over this LAT's nodes delegated to the operator.",
    )
    tvl = OperatorTvlSerializer(required=False, help_text="Present when withTvl=true.")


class LatOperatorListSerializer(serializers.Serializer):
    # The envelope's field, not Serializer.data (DRF's metaclass takes it off the class).
    data = LatOperatorSerializer(many=True, read_only=True)  # type: ignore[assignment]


class StakerNodeAssetSerializer(serializers.Serializer):
    nodeAddress = AddressOutField(source="node.address")
    asset = AddressOutField(source="token.address")
    strategy = AddressOutField(source="strategy_address")
    stakedAmount = UintStringField(source="staked_amount")
    coreShares = UintStringField(source="core_shares")


class StakerNodeSerializer(serializers.Serializer):
    address = AddressOutField()
    nodeId = serializers.IntegerField(source="node_id", read_only=True)
    operatorDelegation = AddressOutField(
        source="operator_delegation", help_text="Zero address when undelegated."
    )
    liquidTokenAddress = AddressOutField(source="lat.proxy_address")
    createdAtBlock = serializers.IntegerField(source="created_at_block", read_only=True)
    createdAt = serializers.DateTimeField(source="created_at", read_only=True)
    updatedAtBlock = serializers.IntegerField(source="updated_at_block", read_only=True)
    updatedAt = serializers.DateTimeField(source="updated_at", read_only=True)
    assets = StakerNodeAssetSerializer(source="assets.all", many=True, read_only=True)


class StakerNodeListSerializer(serializers.Serializer):
    address = AddressOutField(help_text="Proxy address of the LAT.")
    maxNodes = serializers.IntegerField(read_only=True)
    stakerNodes = StakerNodeSerializer(many=True, read_only=True)
