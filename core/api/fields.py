"""Serializer fields shared by every app's API."""

from __future__ import annotations

from decimal import Decimal

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from core.addresses import ADDRESS_PATTERN


@extend_schema_field({"type": "string", "pattern": r"^\d+$", "example": "1000000000000000000"})
class UintStringField(serializers.Field):
    """A raw on-chain integer, out as a decimal string (no precision lost)."""

    def __init__(self, **kwargs):
        kwargs.setdefault("read_only", True)
        super().__init__(**kwargs)

    def to_representation(self, value) -> str:
        return str(int(Decimal(value)))


@extend_schema_field({"type": "string", "pattern": ADDRESS_PATTERN, "example": "0x" + "ab" * 20})
class AddressOutField(serializers.CharField):
    """An EIP-55 checksummed address."""

    def __init__(self, **kwargs):
        kwargs.setdefault("read_only", True)
        super().__init__(**kwargs)


@extend_schema_field(OpenApiTypes.NUMBER)
class NumberField(serializers.Field):
    """A JSON number computed from exact decimals at the edge."""

    def __init__(self, **kwargs):
        kwargs.setdefault("read_only", True)
        super().__init__(**kwargs)

    def to_representation(self, value) -> float:
        return float(value)


def number_map(source: str, help_text: str) -> serializers.DictField:
    """A read-only object of names to JSON numbers."""
    return serializers.DictField(
        source=source, child=NumberField(), read_only=True, help_text=help_text
    )


class ErrorDetailSerializer(serializers.Serializer):
    code = serializers.ChoiceField(
        choices=[
            "bad_request",
            "unauthorized",
            "forbidden",
            "not_found",
            "unprocessable_entity",
            "rate_limit_exceeded",
            "internal_server_error",
        ]
    )
    message = serializers.CharField()
    doc_url = serializers.CharField(help_text="{DOCS_URL}/errors#<code>")


class ErrorSerializer(serializers.Serializer):
    error = ErrorDetailSerializer()
