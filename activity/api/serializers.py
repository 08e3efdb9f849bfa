"""The shapes of the activity endpoints (holders, events, wallets, status), as the schema
documents them; activity/selectors.py builds the documents in these shapes."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from activity.selectors import FEED_TYPES
from chain.activity import FEED_ARGS, UPGRADEABLE
from core.addresses import ADDRESS_PATTERN
from core.api.fields import AddressOutField, NumberField, UintStringField

_ADDRESS = {"type": "string", "pattern": ADDRESS_PATTERN}
_UINT = {"type": "string", "pattern": r"^\d+$"}
_ISO = {"type": "string", "format": "date-time"}
# The schema of each argument of the feed (by its name in extensions.md's table).
_ARG_SCHEMAS: dict[str, dict[str, Any]] = {
    "nodeId": {"type": "integer", "minimum": 0},
    "decimals": {"type": "integer", "minimum": 0},
    "assets": {"type": "array", "items": _ADDRESS},
    "strategies": {"type": "array", "items": _ADDRESS},
    "amounts": {"type": "array", "items": _UINT},
    "isInitialRegistration": {"type": "boolean"},
    "timestamp": _ISO,
    "contract": {"type": "string", "enum": list(UPGRADEABLE.values())},
    **{
        name: _UINT
        for name in (
            "amount",
            "shares",
            "value",
            "initialPrice",
            "volatilityThreshold",
            "oldPrice",
            "newPrice",
            "oldThreshold",
            "newThreshold",
            "oldMaxNodes",
            "newMaxNodes",
            "oldRate",
            "newRate",
        )
    },
}


def _args_schema(kind: str) -> dict[str, Any]:
    names = FEED_ARGS[kind]
    return {
        "type": "object",
        "title": kind,
        "description": f"`args` of a `{kind}` event.",
        "properties": {name: _ARG_SCHEMAS.get(name, _ADDRESS) for name in names},
        "required": list(names),
        "additionalProperties": False,
    }


@extend_schema_field({"anyOf": [_args_schema(kind) for kind in FEED_TYPES]})
class EventArgsField(serializers.DictField):
    """`args`: one object per type, as extensions.md's table lists them."""


class HolderSerializer(serializers.Serializer):
    address = AddressOutField()
    balance = UintStringField(help_text="LAT balance, the LAT's smallest unit.")


class HolderMetaSerializer(serializers.Serializer):
    total = serializers.IntegerField(
        help_text="Addresses whose balance is above zero at the last indexed block."
    )
    skip = serializers.IntegerField()
    take = serializers.IntegerField()


class HolderListSerializer(serializers.Serializer):
    data = HolderSerializer(many=True, read_only=True)  # type: ignore[assignment]
    meta = HolderMetaSerializer(read_only=True)


class EventSerializer(serializers.Serializer):
    type = serializers.ChoiceField(choices=FEED_TYPES, read_only=True)
    blockNumber = serializers.IntegerField(read_only=True, min_value=0)
    blockTimestamp = serializers.DateTimeField(read_only=True)
    transactionHash = serializers.RegexField(r"^0x[0-9a-fA-F]{64}$", read_only=True)
    logIndex = serializers.IntegerField(read_only=True, min_value=0)
    args = EventArgsField(
        read_only=True,
        help_text="The event's arguments under the names of the table in the operation's "
        "description: addresses checksummed, uint256 values as decimal strings, `nodeId` and "
        "`decimals` as numbers, arrays as arrays.",
    )


class EventMetaSerializer(serializers.Serializer):
    next = serializers.CharField(
        allow_null=True,
        read_only=True,
        help_text="Cursor of the next page (pass it back as `cursor`), or null on the last page.",
    )


class EventListSerializer(serializers.Serializer):
    data = EventSerializer(many=True, read_only=True)  # type: ignore[assignment]
    meta = EventMetaSerializer(read_only=True)


class PositionSerializer(serializers.Serializer):
    latAddress = AddressOutField()
    latSymbol = serializers.CharField(read_only=True)
    chainId = serializers.IntegerField(read_only=True)
    balance = UintStringField(help_text="LAT balance, the LAT's smallest unit.")
    valueEth = NumberField(
        allow_null=True,
        help_text="The balance in ETH: to the unit of account at the stored totalAssets / "
        "totalSupply, then to ETH as the LAT's TVL is; null while the unit of account's ETH "
        "price is unknown (a token with no price feed yet).",
    )
    deposits = serializers.IntegerField(
        read_only=True, help_text="Deposit records whose receiver is the wallet."
    )


class WalletSerializer(serializers.Serializer):
    address = AddressOutField()
    positions = PositionSerializer(many=True, read_only=True)


class WalletResponseSerializer(serializers.Serializer):
    data = WalletSerializer(read_only=True)  # type: ignore[assignment]


class StatusSerializer(serializers.Serializer):
    paused = serializers.BooleanField(read_only=True, help_text="`paused()` at `stateBlock`.")
    pricesStale = serializers.BooleanField(
        read_only=True,
        allow_null=True,
        help_text="The price oracle's `arePricesStale()` at `stateBlock` (the LAT's "
        "`tokenRegistryOracle()`, else its manifest's oracle); null where the deployment has "
        "no such view (older deployments: tags up to v1.0.2 and Holesky v1; `/health`'s "
        "`gaps` names the missing function), has no oracle, or before the first refresh.",
    )
    lastPriceUpdate = serializers.DateTimeField(
        read_only=True,
        allow_null=True,
        help_text="The oracle's `lastPriceUpdate()` at `stateBlock`; null when 0, where the "
        "deployment has no such view (older deployments, as for `pricesStale`), or before the "
        "first refresh.",
    )
    stateBlock = serializers.IntegerField(
        read_only=True, allow_null=True, help_text="The block the stored state was read at."
    )
    indexedBlock = serializers.IntegerField(
        read_only=True,
        allow_null=True,
        help_text="The last block whose deposits and events are stored.",
    )
    chainHead = serializers.IntegerField(
        read_only=True,
        allow_null=True,
        help_text="The newest head the service's jobs have seen for the chain, as the indexer "
        "counts it: CHAIN_CONFIRMATIONS blocks behind the node's own head (decision: a block "
        "the service would not index yet is no lag).",
    )
    lagBlocks = serializers.IntegerField(
        read_only=True, allow_null=True, help_text="`chainHead` - `indexedBlock`."
    )
    lagSeconds = serializers.IntegerField(
        read_only=True,
        allow_null=True,
        help_text="Timestamp of `chainHead` - timestamp of `indexedBlock` (0 when caught up).",
    )
    lastSuccessAt = serializers.DateTimeField(
        read_only=True,
        allow_null=True,
        help_text="When the last refresh of the LAT's state succeeded.",
    )


class StatusResponseSerializer(serializers.Serializer):
    data = StatusSerializer(read_only=True)  # type: ignore[assignment]
