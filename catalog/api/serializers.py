from __future__ import annotations

from rest_framework import serializers

from core.api.fields import NumberField


class YieldPoolSerializer(serializers.Serializer):
    pool = serializers.CharField(help_text="`{proxyAddress}-{chain}`, lower case: unique.")
    chain = serializers.CharField(help_text="DefiLlama's name of the chain.")
    project = serializers.CharField(help_text="Setting YIELDS_PROJECT.")
    symbol = serializers.CharField()
    tvlUsd = NumberField(help_text="TVL in USD: the TVL in ETH at ETH's USD feed price.")
    apyBase = NumberField(help_text="nativeApy of the last complete day, percent.")
    apyBase7d = NumberField(help_text="nativeApy over the last 7 days, percent.")
    apyReward = NumberField(
        allow_null=True,
        help_text="apy (AVS rewards) over the last 7 days, percent; null where unknown.",
    )
    rewardTokens = serializers.ListField(
        child=serializers.CharField(),
        help_text="Tokens of the counted rewards submissions paying on any of the last 7 days.",
    )
    underlyingTokens = serializers.ListField(child=serializers.CharField())
    pricePerShare = NumberField(help_text="Units of account per whole LAT.")
    poolMeta = serializers.CharField(allow_null=True, help_text="The AVS's name.")
    url = serializers.CharField()


class OmittedPoolSerializer(serializers.Serializer):
    address = serializers.CharField(help_text="The LAT's proxy address.")
    symbol = serializers.CharField()
    reason = serializers.CharField(help_text="Why its value in USD is unknown.")


class YieldsMetaSerializer(serializers.Serializer):
    omitted = OmittedPoolSerializer(many=True)


class YieldsSerializer(serializers.Serializer):
    data = YieldPoolSerializer(many=True, read_only=True)  # type: ignore[assignment]
    meta = YieldsMetaSerializer(read_only=True)
