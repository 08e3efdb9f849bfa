from __future__ import annotations

from drf_spectacular.utils import extend_schema_field, inline_serializer
from rest_framework import serializers

from core.api.fields import AddressOutField, NumberField, UintStringField, number_map


class LatTokenSerializer(serializers.Serializer):
    address = AddressOutField(source="token.address")
    strategyAddress = AddressOutField(source="strategy_address")
    volatilityThreshold = UintStringField(source="volatility_threshold")
    pricePerUnit = UintStringField(source="price_per_unit")
    decimals = serializers.IntegerField(read_only=True)


class LatTokenWithRefIdSerializer(LatTokenSerializer):
    refId = serializers.IntegerField(source="token.ref_id", read_only=True)


@extend_schema_field(
    inline_serializer(
        "LatContractDeployments",
        {
            "implementation": serializers.DictField(
                child=AddressOutField(), help_text="Contract name to implementation address."
            ),
            "proxy": serializers.DictField(
                child=AddressOutField(), help_text="Contract name to proxy address."
            ),
        },
    )
)
class ContractDeploymentsField(serializers.Field):
    def __init__(self, **kwargs):
        kwargs.setdefault("read_only", True)
        super().__init__(**kwargs)

    def to_representation(self, value) -> dict:
        value = value or {}
        return {
            "implementation": dict(value.get("implementation") or {}),
            "proxy": dict(value.get("proxy") or {}),
        }


class LatSerializer(serializers.Serializer):
    proxyAddress = AddressOutField(source="proxy_address")
    implementationAddress = AddressOutField(source="implementation_address")
    name = serializers.CharField(read_only=True)
    symbol = serializers.CharField(read_only=True)
    avsAddress = AddressOutField(source="avs.address")
    chainId = serializers.IntegerField(source="chain_id", read_only=True)
    maxNodes = serializers.IntegerField(source="max_nodes", read_only=True)
    contractDeployments = ContractDeploymentsField(source="contract_deployments")
    tokens = LatTokenSerializer(source="lat_tokens.all", many=True, read_only=True)


class LatListSerializer(serializers.Serializer):
    # The envelope's field, not Serializer.data (DRF's metaclass takes it off the class).
    data = LatSerializer(many=True, read_only=True)  # type: ignore[assignment]


class LatGroupsSerializer(serializers.Serializer):
    ETH = LatSerializer(many=True, read_only=True)
    BTC = LatSerializer(many=True, read_only=True)
    Native = LatSerializer(many=True, read_only=True)


class LatGroupedListSerializer(serializers.Serializer):
    # The envelope's field, not Serializer.data (DRF's metaclass takes it off the class).
    data = LatGroupsSerializer(read_only=True)  # type: ignore[assignment]


class AssetBalanceSerializer(serializers.Serializer):
    asset = AddressOutField(source="token.address")
    balance = UintStringField()
    queuedBalance = UintStringField(source="queued_balance")


_NULL_ETH = " Null while the unit of account's ETH price is unknown (no price feed yet)."


class TvlSerializer(serializers.Serializer):
    tvl = NumberField(allow_null=True, help_text="Total value locked, ETH." + _NULL_ETH)
    unstakedTvl = NumberField(
        source="unstaked_tvl", allow_null=True, help_text="Held by the LAT, ETH." + _NULL_ETH
    )
    stakedTvl = NumberField(
        source="staked_tvl", allow_null=True, help_text="Staked in nodes, ETH." + _NULL_ETH
    )
    queuedTvl = NumberField(
        source="queued_tvl", allow_null=True, help_text="Queued, ETH." + _NULL_ETH
    )
    tvlAssets = number_map(
        "tvl_assets", "Token symbol to amount held (unstaked + staked + queued), whole tokens."
    )
    tvlAssetsEth = serializers.DictField(
        source="tvl_assets_eth",
        child=NumberField(allow_null=True),
        read_only=True,
        help_text="Token symbol to the ETH value of that amount." + _NULL_ETH,
    )


class ApyValuesSerializer(serializers.Serializer):
    apy = serializers.CharField(
        read_only=True,
        allow_null=True,
        help_text="AVS rewards APY, percent; null where the chain's EigenLayer "
        "RewardsCoordinator is unknown (no network preset, manifest or admin override).",
    )
    baseApy = serializers.CharField(read_only=True, help_text="Underlying tokens' yield, percent.")
    nativeApy = serializers.CharField(read_only=True, help_text="Exchange-rate growth, percent.")
    totalApy = serializers.CharField(
        read_only=True, allow_null=True, help_text="apy + baseApy, percent; null with apy."
    )


class ApysSerializer(serializers.Serializer):
    current = ApyValuesSerializer(help_text="Last 24 hours.")
    avg30d = ApyValuesSerializer(help_text="Mean of the last 30 daily values.")
    trailing7d = ApyValuesSerializer()
    trailing30d = ApyValuesSerializer()
    trailing3m = ApyValuesSerializer()
    trailing6m = ApyValuesSerializer()
    trailing1y = ApyValuesSerializer()


class CuratedMetadataSerializer(serializers.Serializer):
    avsAddress = AddressOutField(source="address")
    metadataName = serializers.CharField(source="metadata_name", allow_null=True)
    metadataDescription = serializers.CharField(source="metadata_description", allow_null=True)
    metadataCommunityChat = serializers.CharField(source="metadata_community_chat", allow_null=True)
    metadataLogo = serializers.CharField(source="metadata_logo", allow_null=True)
    metadataMessaging = serializers.CharField(source="metadata_messaging", allow_null=True)
    metadataWebsite = serializers.CharField(source="metadata_website", allow_null=True)
    metadataSocial = serializers.CharField(source="metadata_social", allow_null=True)
    metadataCode = serializers.CharField(source="metadata_code", allow_null=True)
    metadataTokenAddress = AddressOutField(source="metadata_token_address", allow_null=True)
    tags = serializers.ListField(child=serializers.CharField(), read_only=True)


class LatDetailSerializer(LatSerializer):
    assets = AssetBalanceSerializer(
        source="lat_tokens.all",
        many=True,
        read_only=True,
        help_text="Always present: one entry per supported token.",
    )
    tvl = TvlSerializer(required=False, help_text="Present when withTvl=true.")
    apys = ApysSerializer(required=False, help_text="Present when withRewards=true.")
    curatedMetadata = CuratedMetadataSerializer(
        source="avs", required=False, help_text="Present when withCuratedMetadata=true."
    )


class LatTokenListSerializer(serializers.Serializer):
    # The envelope's field, not Serializer.data (DRF's metaclass takes it off the class).
    data = LatTokenWithRefIdSerializer(many=True, read_only=True)  # type: ignore[assignment]


class LatRefSerializer(serializers.Serializer):
    latAddress = AddressOutField(source="lat.proxy_address")
    latName = serializers.CharField(source="lat.name", read_only=True)
    latSymbol = serializers.CharField(source="lat.symbol", read_only=True)


class SupportedTokenSerializer(serializers.Serializer):
    tokenAddress = AddressOutField(source="address")
    tokenSymbol = serializers.CharField(source="symbol", read_only=True)
    tokenName = serializers.CharField(source="name", read_only=True)
    tokenDecimals = serializers.IntegerField(source="decimals", read_only=True)
    tokenRefId = serializers.IntegerField(source="ref_id", read_only=True)
    lats = LatRefSerializer(source="lat_links.all", many=True, read_only=True)


class SupportedTokenListSerializer(serializers.Serializer):
    # The envelope's field, not Serializer.data (DRF's metaclass takes it off the class).
    data = SupportedTokenSerializer(many=True, read_only=True)  # type: ignore[assignment]


class ExchangeRatesSerializer(serializers.Serializer):
    address = AddressOutField()
    exchangeRates = serializers.DictField(
        child=serializers.FloatField(),
        read_only=True,
        help_text=(
            "For a LAT: token symbol to how many tokens one whole LAT is worth. For a token: "
            "LAT symbol to how many LATs one whole token buys."
        ),
    )


class FeeStructureSerializer(serializers.Serializer):
    managementFee = serializers.FloatField(read_only=True, help_text="Percent, set by staff.")
    performanceFee = serializers.FloatField(read_only=True, help_text="Percent, set by staff.")
    avgOperatorPerformanceFee = serializers.FloatField(
        read_only=True,
        allow_null=True,
        help_text=(
            "Mean operator AVS split of the delegated operators, percent (10 where an operator "
            "set none; 0 when the LAT delegates to no operator); null where the chain's "
            "EigenLayer RewardsCoordinator is unknown (no network preset, manifest or admin "
            "override), so the splits cannot be read."
        ),
    )


class FeeStructureResponseSerializer(serializers.Serializer):
    # The envelope's field, not Serializer.data (DRF's metaclass takes it off the class).
    data = FeeStructureSerializer(read_only=True)  # type: ignore[assignment]


class AvsLatSerializer(serializers.Serializer):
    address = AddressOutField(source="proxy_address")
    symbol = serializers.CharField(read_only=True)


class AvsLatListSerializer(serializers.Serializer):
    # The envelope's field, not Serializer.data (DRF's metaclass takes it off the class).
    data = AvsLatSerializer(many=True, read_only=True)  # type: ignore[assignment]
