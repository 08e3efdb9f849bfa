"""Webhooks (extensions.md, "Webhooks"): the endpoints an API key registered, the outbox of
what happened (one row per event, written in the transaction that stored it), and the
deliveries of each event to each matching endpoint with their attempts."""

from __future__ import annotations

from django.db import models
from rest_framework_api_key.models import APIKey

from core.history import History
from lats.models import Lat


class Endpoint(models.Model):
    """A URL that receives the events its filters select, signed with its secret."""

    # Secrets are kept out of the history: staff see who changed a URL or a filter, not keys.
    _SECRET_FIELDS = ("secret", "previous_secret", "previous_secret_until")

    public_id = models.CharField(max_length=40, unique=True, help_text="The API's `id`.")
    api_key = models.ForeignKey(APIKey, on_delete=models.CASCADE, related_name="webhooks")
    url = models.URLField(max_length=2000)
    types = models.JSONField(default=list, blank=True, help_text="Empty: every type.")
    lats = models.JSONField(
        default=list, blank=True, help_text="Checksummed LAT addresses; empty: every LAT."
    )
    wallets = models.JSONField(
        default=list, blank=True, help_text="Lower-case addresses; empty: no wallet filter."
    )
    description = models.CharField(max_length=500, blank=True, default="")

    class DisabledBy(models.TextChoices):
        KEY = "key", "its API key"  # paused with PATCH {enabled: false}
        SERVICE = "service", "the service"  # every delivery failed for WEBHOOK_DISABLE_AFTER
        STAFF = "staff", "staff"  # admin: only staff enable it again

    enabled = models.BooleanField(default=True)
    disabled_by = models.CharField(
        max_length=8,
        choices=DisabledBy.choices,
        blank=True,
        default="",
        help_text="Who disabled the endpoint; empty while it is enabled.",
    )
    disabled_reason = models.CharField(max_length=200, blank=True, default="")
    secret = models.CharField(max_length=60)
    previous_secret = models.CharField(max_length=60, blank=True, default="")
    previous_secret_until = models.DateTimeField(null=True, blank=True)
    failing_since = models.DateTimeField(
        null=True, blank=True, help_text="First failed attempt since the last success."
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    history = History(excluded_fields=[*_SECRET_FIELDS, "failing_since", "updated_at"])

    class Meta:
        ordering = ("created_at", "id")
        indexes = [models.Index(fields=("api_key", "created_at"), name="webhook_key_idx")]

    def __str__(self) -> str:
        return f"{self.public_id} {self.url}"


class OutboxEvent(models.Model):
    """One event to push (a chain event, a status change, a removal, a ping): written in the
    transaction that stored what it announces, fanned out to the matching endpoints later."""

    class Type(models.TextChoices):
        STATUS_CHANGED = "statusChanged"
        EVENT_REMOVED = "eventRemoved"
        PING = "ping"
        # every other type is an activity feed type (deposits.models.Event.Type)

    event_id = models.CharField(max_length=120, help_text="The payload's `id`.")
    type = models.CharField(max_length=40)
    lat = models.ForeignKey(Lat, on_delete=models.CASCADE, null=True, blank=True)
    block_number = models.PositiveBigIntegerField(null=True, blank=True)
    log_index = models.PositiveIntegerField(null=True, blank=True)
    wallets = models.JSONField(default=list, blank=True, help_text="Lower-case addresses named.")
    payload = models.JSONField(help_text="{id, type, createdAt, data}")
    created_at = models.DateTimeField(auto_now_add=True)
    fanned_out_at = models.DateTimeField(null=True, blank=True)
    removed = models.BooleanField(default=False, help_text="Orphaned by a reorg.")
    # eventRemoved: the event it withdraws (None once retention deleted that event: its id
    # stays in the payload).
    removes = models.ForeignKey("self", on_delete=models.SET_NULL, null=True, blank=True)
    # ping: the one endpoint it goes to.
    endpoint = models.ForeignKey(Endpoint, on_delete=models.CASCADE, null=True, blank=True)

    class Meta:
        ordering = ("id",)
        constraints = [
            models.UniqueConstraint(
                fields=("event_id",),
                condition=models.Q(removed=False),
                name="outbox_event_id_uniq",
            ),
        ]
        indexes = [
            models.Index(
                fields=("id",),
                condition=models.Q(fanned_out_at__isnull=True),
                name="outbox_pending_idx",
            ),
            models.Index(fields=("lat", "block_number"), name="outbox_lat_block_idx"),
        ]

    def __str__(self) -> str:
        return self.event_id


class Delivery(models.Model):
    """One event to one endpoint: its attempts and what became of it."""

    class Status(models.TextChoices):
        PENDING = "pending"
        DELIVERED = "delivered"
        FAILED = "failed"
        CANCELLED = "cancelled"  # the event was orphaned by a reorg before its first attempt

    endpoint = models.ForeignKey(Endpoint, on_delete=models.CASCADE, related_name="deliveries")
    event = models.ForeignKey(OutboxEvent, on_delete=models.CASCADE, related_name="deliveries")
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.PENDING)
    attempt_count = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    first_attempt_at = models.DateTimeField(null=True, blank=True)
    last_status_code = models.PositiveIntegerField(null=True, blank=True)
    # Claimed by a dispatcher for an attempt, until then (the lease): counted against the
    # endpoint's WEBHOOK_PER_ENDPOINT by every dispatcher's claim; None once recorded.
    leased_until = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    history = History(excluded_fields=["updated_at", "leased_until"])

    class Meta:
        ordering = ("-id",)
        verbose_name_plural = "deliveries"
        constraints = [
            models.UniqueConstraint(fields=("endpoint", "event"), name="delivery_uniq"),
        ]
        indexes = [
            models.Index(
                fields=("next_attempt_at",),
                condition=models.Q(status="pending"),
                name="delivery_due_idx",
            ),
            models.Index(fields=("endpoint", "-id"), name="delivery_endpoint_idx"),
            # The claim: each endpoint's oldest due deliveries, and its leased ones.
            models.Index(
                fields=("endpoint", "next_attempt_at", "id"),
                condition=models.Q(status="pending"),
                name="delivery_endpoint_due_idx",
            ),
            models.Index(
                fields=("endpoint", "leased_until"),
                condition=models.Q(leased_until__isnull=False),
                name="delivery_leased_idx",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.event_id} -> {self.endpoint_id}"


class Attempt(models.Model):
    """One HTTP POST of a delivery."""

    delivery = models.ForeignKey(Delivery, on_delete=models.CASCADE, related_name="attempts")
    at = models.DateTimeField()
    status_code = models.PositiveIntegerField(null=True, blank=True)
    error = models.CharField(max_length=300, blank=True, default="")
    duration_ms = models.PositiveIntegerField()
    response_head = models.TextField(blank=True, default="", help_text="First bytes answered.")

    class Meta:
        ordering = ("-at", "-id")
        indexes = [models.Index(fields=("delivery", "-at"), name="attempt_delivery_idx")]

    def __str__(self) -> str:
        return f"{self.delivery_id} at {self.at:%Y-%m-%d %H:%M:%S}"


class RetentionMark(models.Model):
    """How far the retention jobs (webhooks/retention.py) have deleted a table: every row with
    an id up to `deleted_through` is gone (they delete the oldest ids first). A stream cursor
    or a listing cursor below it names what is no longer kept."""

    class Table(models.TextChoices):
        OUTBOX = "outbox"
        DELIVERIES = "deliveries"

    table = models.CharField(max_length=20, primary_key=True, choices=Table.choices)
    deleted_through = models.PositiveBigIntegerField(default=0)
    ran_at = models.DateTimeField(null=True, blank=True, help_text="The last batch deleted.")

    def __str__(self) -> str:
        return f"{self.table} through {self.deleted_through}"
