"""Request and response shapes of the Direct Restaking endpoints (POST deposit and
simulate-deposit).

The request serializers document the body; the service (`deposits.restaking`) validates it, so
that a JSON number in `amounts` is refused rather than coerced and every message names its field
and index. The response serializers shape the service's dataclasses.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from rest_framework import serializers

from core.addresses import ADDRESS_PATTERN
from core.api.fields import AddressOutField, UintStringField
from deposits.restaking import AMOUNT_PATTERN, DepositSimulation
from deposits.reverts import REASON_CODES

# --- request bodies -------------------------------------------------------------------------


class DepositBodySerializer(serializers.Serializer):
    assets = serializers.ListField(
        child=serializers.RegexField(ADDRESS_PATTERN),
        min_length=1,
        max_length=settings.DEPOSIT_MAX_ASSETS,
        help_text=(
            "Token addresses to deposit, each supported by this LAT (see GET "
            "/lat/{address}/tokens). An asset may appear more than once: the contract deposits "
            "each entry separately. At most `DEPOSIT_MAX_ASSETS` entries (default 32); more "
            "is a 422."
        ),
    )
    amounts = serializers.ListField(
        child=serializers.RegexField(AMOUNT_PATTERN),
        min_length=1,
        max_length=settings.DEPOSIT_MAX_ASSETS,
        help_text=(
            "Amount for the asset at the same index, in that token's smallest unit, as a JSON "
            "string of digits, above 0 and below 2^256. A JSON number is refused (422). As "
            "many entries as `assets`."
        ),
    )
    receiver = serializers.RegexField(
        ADDRESS_PATTERN, help_text="Wallet that receives the minted LAT; not the zero address."
    )


class SimulateDepositBodySerializer(DepositBodySerializer):
    sender = serializers.RegexField(
        ADDRESS_PATTERN,
        help_text="Wallet that submits the transaction and is debited (the eth_call's `from`).",
    )


# --- POST /lat/{address}/deposit ------------------------------------------------------------


class DepositTransactionSerializer(serializers.Serializer):
    to = AddressOutField(help_text="The LAT proxy, EIP-55 checksummed.")
    # The envelope's field, not Serializer.data (DRF's metaclass takes it off the class).
    data = serializers.CharField(  # type: ignore[assignment]
        read_only=True,
        help_text="ABI-encoded call of deposit(address[],uint256[],address), 0x-prefixed hex.",
    )
    value = serializers.CharField(read_only=True, help_text='Wei sent along, hex: always "0x0".')


class DepositBuildSerializer(serializers.Serializer):
    transaction = DepositTransactionSerializer(source="*", read_only=True)
    chainId = serializers.CharField(
        source="chain_id", read_only=True, help_text="Chain id of the LAT, a decimal string."
    )
    functionName = serializers.CharField(
        source="function_name", read_only=True, help_text='Always "deposit".'
    )


class DepositBuildResponseSerializer(serializers.Serializer):
    # The envelope's field, not Serializer.data (DRF's metaclass takes it off the class).
    data = DepositBuildSerializer(read_only=True)  # type: ignore[assignment]


# --- POST /lat/{address}/simulate-deposit ---------------------------------------------------


class DepositGasFeesSerializer(serializers.Serializer):
    gasLimit = UintStringField(
        source="gas_limit", help_text='eth_estimateGas of the deposit; "0" when it reverts.'
    )
    gasPrice = UintStringField(source="gas_price", help_text="The node's eth_gasPrice, wei.")
    gasFee = UintStringField(source="gas_fee", help_text="gasLimit x gasPrice, wei.")


class DepositServiceFeesSerializer(serializers.Serializer):
    managementFee = serializers.FloatField(
        source="management_fee", read_only=True, help_text="Percent, set by staff; 0 when none."
    )
    performanceFee = serializers.FloatField(
        source="performance_fee", read_only=True, help_text="Percent, set by staff; 0 when none."
    )


class DepositSimulationFeesSerializer(serializers.Serializer):
    gas = DepositGasFeesSerializer(source="*", read_only=True)
    service = DepositServiceFeesSerializer(source="*", read_only=True)


class DepositSimulationSerializer(serializers.Serializer):
    """The whole body of a simulate-deposit answer: its members at the top level, with no
    `data` wrapper."""

    success = serializers.BooleanField(
        read_only=True, help_text="Whether the deposit would succeed now."
    )
    amounts = serializers.ListField(
        child=serializers.FloatField(),
        read_only=True,
        help_text=(
            "LAT shares the deposit would mint, one per entry of `assets`, in whole LAT units "
            "(shares / 1e18). Empty when the deposit would revert."
        ),
    )
    fees = DepositSimulationFeesSerializer(source="*", read_only=True)
    pricesStale = serializers.BooleanField(
        source="prices_stale",
        allow_null=True,
        read_only=True,
        help_text=(
            "Whether the LAT's prices are stale at the simulated block (its oracle's "
            "`arePricesStale()`, read in the same batch). When true, the deposit first "
            "refreshes every token's price from its source: `amounts` and `fees.gas` already "
            "include that refresh, and the shares may differ from `calculateShares`. Null where "
            "the LAT has no such oracle view (older deployments)."
        ),
    )
    # Not read-only, so that the schema marks them optional: each present only when it applies.
    note = serializers.CharField(
        required=False,
        help_text="Only when `pricesStale` is true: that the deposit refreshes every price first.",
    )
    reason = serializers.CharField(
        required=False,
        help_text=(
            "Only when `success` is false: why the deposit would fail, in words a wallet can "
            'show, e.g. "The LAT is paused: it accepts no deposits until it is unpaused."'
        ),
    )
    reasonCode = serializers.ChoiceField(
        source="reason_code",
        choices=REASON_CODES,
        required=False,
        help_text=(
            "Only when `success` is false: the kind of failure, stable for programs. "
            "`price_refresh_failed`: prices were stale and a price source gave no price; "
            "`unknown_error`: a revert selector this service does not know; `other`: a known "
            "error of none of the other kinds."
        ),
    )
    revert = serializers.CharField(
        required=False,
        help_text=(
            "Only when `success` is false: the revert as the contracts gave it, decoded: the "
            'string of an `Error(string)` ("Pausable: paused", as Mainnet v1 LATs revert), '
            '"Panic(0x11: arithmetic overflow or underflow)", a custom error with its '
            'arguments ("EnforcedPause()", "UnsupportedAsset(0x…)", '
            '"ERC20InsufficientAllowance(0x…, 0, 1000)"), or "unknown error 0x12345678".'
        ),
    )
    revertData = serializers.RegexField(
        r"^0x([0-9a-f]{2})*$",
        source="revert_data",
        required=False,
        help_text='Only when `success` is false: the raw revert data, 0x-hex ("0x" for none).',
    )

    def to_representation(self, instance):
        data = super().to_representation(instance)
        if not instance.prices_stale:
            data.pop("note", None)
        if instance.success:
            for field in ("reason", "reasonCode", "revert", "revertData"):
                data.pop(field, None)
        return data


def deposit_simulation_data(simulation: DepositSimulation) -> dict[str, Any]:
    """The body DepositSimulationSerializer documents for `simulation`, built directly: this is
    the endpoint's hot path, and the serializer's field copies cost more than the rest of
    shaping the answer. tests/deposits/test_restaking.py checks that real answers validate
    against the OpenAPI schema."""
    data: dict[str, Any] = {
        "success": simulation.success,
        "amounts": [float(amount) for amount in simulation.amounts],
        "fees": {
            "gas": {
                "gasLimit": str(simulation.gas_limit),
                "gasPrice": str(simulation.gas_price),
                "gasFee": str(simulation.gas_fee),
            },
            "service": {
                "managementFee": float(simulation.management_fee),
                "performanceFee": float(simulation.performance_fee),
            },
        },
        "pricesStale": simulation.prices_stale,
    }
    if simulation.prices_stale:
        data["note"] = simulation.note
    if simulation.failure is not None:
        data["reason"] = simulation.failure.reason
        data["reasonCode"] = simulation.failure.code
        data["revert"] = simulation.failure.revert
        data["revertData"] = simulation.failure.revert_data
    return data
