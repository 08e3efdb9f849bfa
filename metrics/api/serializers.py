from __future__ import annotations

from rest_framework import serializers

from core.api.fields import NumberField

_NULL_ETH = "ETH; null while the unit of account's ETH price was unknown (no price feed yet)."


class HistoricalPointSerializer(serializers.Serializer):
    timestamp = serializers.DateTimeField(read_only=True, help_text="End of the period, UTC.")
    totalTvlEth = NumberField(source="total_tvl_eth", allow_null=True, help_text=_NULL_ETH)
    stakedTvlEth = NumberField(source="staked_tvl_eth", allow_null=True, help_text=_NULL_ETH)
    unstakedTvlEth = NumberField(source="unstaked_tvl_eth", allow_null=True, help_text=_NULL_ETH)
    apy = NumberField(
        allow_null=True,
        help_text="AVS rewards APY, percent; null where the chain's EigenLayer "
        "RewardsCoordinator is unknown (no network preset, manifest or admin override).",
    )
    baseApy = NumberField(source="base_apy")
    nativeApy = NumberField(source="native_apy")
    totalApy = NumberField(
        source="total_apy", allow_null=True, help_text="apy + baseApy, percent; null with apy."
    )
    totalUsers = serializers.IntegerField(
        source="total_users",
        read_only=True,
        help_text="cumulative: holders at the point (addresses whose LAT balance is above "
        "zero); discrete: addresses that became holders for the first time in the period. "
        "Snapshots taken before the service kept holders count depositors instead.",
    )


class HistoricalListSerializer(serializers.Serializer):
    # The envelope's field, not Serializer.data (DRF's metaclass takes it off the class).
    data = HistoricalPointSerializer(many=True, read_only=True)  # type: ignore[assignment]


class RatePointSerializer(serializers.Serializer):
    timestamp = serializers.DateTimeField(
        help_text="The interval's start (UTC): the day's 00:00, or the hour. The values are "
        "the state at the interval's last block."
    )
    blockNumber = serializers.IntegerField(help_text="The interval's last block.")
    rate = serializers.CharField(
        help_text="Units of account per whole LAT (totalAssets / totalSupply), a decimal "
        "string truncated to 18 decimals; 1 while the supply is zero."
    )
    totalAssets = serializers.CharField(help_text="totalAssets(), unit of account, wei-scaled.")
    totalSupply = serializers.CharField(help_text="totalSupply(), the LAT's smallest unit.")


class RatesMetaSerializer(serializers.Serializer):
    next = serializers.CharField(
        allow_null=True, help_text="Cursor of the next page; null on the last page."
    )


class RatesSerializer(serializers.Serializer):
    data = RatePointSerializer(many=True, read_only=True)  # type: ignore[assignment]
    meta = RatesMetaSerializer(read_only=True)
