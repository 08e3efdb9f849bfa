"""The shapes of the webhook endpoints (extensions.md, "Webhooks"), as the schema documents
them."""

from __future__ import annotations

from rest_framework import serializers

from core.addresses import ADDRESS_PATTERN
from webhooks.outbox import TYPES


def _types_field(**kwargs) -> serializers.ListField:
    return serializers.ListField(
        child=serializers.ChoiceField(choices=TYPES),
        help_text="Event types to receive: those of `GET /lat/{address}/events` plus "
        "`statusChanged` and `eventRemoved`. Empty or left out: every type. An `eventRemoved` "
        "comes whatever the types say for an event that was sent to the endpoint.",
        **kwargs,
    )


def _lats_field(**kwargs) -> serializers.ListField:
    return serializers.ListField(
        child=serializers.RegexField(ADDRESS_PATTERN),
        help_text="Proxy addresses of the LATs whose events to receive (any letter case). "
        "Empty or left out: every LAT.",
        **kwargs,
    )


def _wallets_field(**kwargs) -> serializers.ListField:
    return serializers.ListField(
        child=serializers.RegexField(ADDRESS_PATTERN),
        help_text="Only events whose args name one of these addresses as sender, receiver, "
        "from, to, depositor or initiator. Empty or left out: no such filter.",
        **kwargs,
    )


_URL_HELP = (
    "Where the events are POSTed: `https` (plain `http` only where the service allows it), a "
    "host that resolves to public addresses only, port 443 or 80 (or one the service allows), "
    "no credentials; redirects are not followed. A URL breaking a rule is a 422 naming it."
)


class WebhookCreateRequestSerializer(serializers.Serializer):
    url = serializers.CharField(max_length=2000, help_text=_URL_HELP)
    types = _types_field(required=False, max_length=len(TYPES))
    lats = _lats_field(required=False, max_length=100)
    wallets = _wallets_field(required=False, max_length=100)
    description = serializers.CharField(required=False, allow_blank=True, max_length=500)


class WebhookUpdateRequestSerializer(WebhookCreateRequestSerializer):
    url = serializers.CharField(max_length=2000, required=False, help_text=_URL_HELP)
    enabled = serializers.BooleanField(
        required=False,
        help_text="false: the endpoint is paused; events that happen while it is paused are "
        "never sent to it. true: enabled again (a 403 for an endpoint the service's staff "
        "disabled: only they enable it).",
    )


class WebhookSerializer(serializers.Serializer):
    id = serializers.CharField(read_only=True)
    url = serializers.CharField(read_only=True)
    types = _types_field(read_only=True)
    lats = _lats_field(read_only=True)
    wallets = _wallets_field(read_only=True)
    description = serializers.CharField(read_only=True)
    enabled = serializers.BooleanField(
        read_only=True,
        help_text="false when paused by its key, disabled by the service after every delivery "
        "failed for 3 days (its key may enable it again), or disabled by the service's staff "
        "(only they enable it again).",
    )
    disabledBy = serializers.ChoiceField(
        choices=["key", "service", "staff"],
        read_only=True,
        allow_null=True,
        help_text="Who disabled the endpoint, null while it is enabled: `key` (paused with "
        "`enabled: false`), `service` (every delivery failed for 3 days; fix the receiver, then "
        "enable it again) or `staff` (only they enable it again: `enabled: true` is a 403).",
    )
    createdAt = serializers.DateTimeField(read_only=True)


class WebhookWithSecretSerializer(WebhookSerializer):
    secret = serializers.CharField(
        read_only=True,
        help_text="`whsec_` + base64 of 32 random bytes: the key of the signatures (Standard "
        "Webhooks). Shown this once.",
    )


class WebhookResponseSerializer(serializers.Serializer):
    data = WebhookSerializer(read_only=True)  # type: ignore[assignment]


class WebhookSecretResponseSerializer(serializers.Serializer):
    data = WebhookWithSecretSerializer(read_only=True)  # type: ignore[assignment]


class WebhookListSerializer(serializers.Serializer):
    data = WebhookSerializer(many=True, read_only=True)  # type: ignore[assignment]


class WebhookAttemptSerializer(serializers.Serializer):
    at = serializers.DateTimeField(read_only=True, help_text="When the attempt started.")
    statusCode = serializers.IntegerField(
        read_only=True, allow_null=True, help_text="The HTTP status answered; null: no answer."
    )
    error = serializers.CharField(
        read_only=True, allow_null=True, help_text="Why there was no answer, or null."
    )
    durationMs = serializers.IntegerField(read_only=True, min_value=0)


class WebhookDeliverySerializer(serializers.Serializer):
    id = serializers.IntegerField(read_only=True)
    eventId = serializers.CharField(read_only=True, help_text="The payload's `id`.")
    type = serializers.CharField(read_only=True)
    status = serializers.ChoiceField(
        choices=["pending", "delivered", "failed", "cancelled"], read_only=True
    )
    nextAttemptAt = serializers.DateTimeField(read_only=True, allow_null=True)
    createdAt = serializers.DateTimeField(read_only=True)
    attempts = WebhookAttemptSerializer(many=True, read_only=True, help_text="Newest first.")


class WebhookDeliveryResponseSerializer(serializers.Serializer):
    data = WebhookDeliverySerializer(read_only=True)  # type: ignore[assignment]


class WebhookDeliveryMetaSerializer(serializers.Serializer):
    next = serializers.CharField(
        allow_null=True,
        read_only=True,
        help_text="Cursor of the next page (pass it back as `cursor`), or null on the last page.",
    )


class WebhookDeliveryListSerializer(serializers.Serializer):
    data = WebhookDeliverySerializer(many=True, read_only=True)  # type: ignore[assignment]
    meta = WebhookDeliveryMetaSerializer(read_only=True)


class WebhookTestResultSerializer(WebhookAttemptSerializer):
    deliveryId = serializers.IntegerField(read_only=True)
    eventId = serializers.CharField(read_only=True)


class WebhookTestResponseSerializer(serializers.Serializer):
    data = WebhookTestResultSerializer(read_only=True)  # type: ignore[assignment]
