"""Staff's view of the webhooks: every endpoint (disable, enable) and every delivery with its
attempts (status, duration, the first bytes of the answer), retried from here; the history of
both. The secrets are never shown. An endpoint staff disabled ("Disabled by ...") is enabled
again by staff only: its API key's `PATCH {enabled: true}` is refused."""

from __future__ import annotations

from django.contrib import admin, messages
from django.db import models, transaction
from django.http import HttpRequest
from simple_history.admin import SimpleHistoryAdmin

from webhooks.models import Attempt, Delivery, Endpoint
from webhooks.services import (
    delivery_retry,
    endpoint_staff_disable,
    endpoint_staff_enable,
    endpoint_staff_update,
)


class AttemptInline(admin.TabularInline):
    model = Attempt
    fields = ("at", "status_code", "error", "duration_ms", "response_head")
    readonly_fields = fields
    extra = 0
    can_delete = False
    ordering = ("-at", "-id")

    def has_add_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Endpoint)
class EndpointAdmin(SimpleHistoryAdmin):
    list_display = ("public_id", "url", "api_key", "enabled", "failing_since", "created_at")
    list_filter = ("enabled", "disabled_by")
    search_fields = ("public_id", "url", "description")
    fields = (
        "public_id",
        "api_key",
        "url",
        "types",
        "lats",
        "wallets",
        "description",
        "enabled",
        "disabled_by",
        "disabled_reason",
        "failing_since",
        "created_at",
        "updated_at",
    )
    readonly_fields = (
        "public_id",
        "api_key",
        "disabled_by",
        "disabled_reason",
        "failing_since",
        "created_at",
        "updated_at",
    )
    actions = ("disable", "enable")
    formfield_overrides = {models.URLField: {"assume_scheme": "https"}}

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # an endpoint belongs to the API key that registers it (POST /webhooks)

    def save_model(self, request, obj, form, change) -> None:
        """Only what the form changed is written (a rotation, or an attempt's write, that lands
        meanwhile stays). Unticking `enabled` is staff disabling the endpoint, which only staff
        enable again; ticking it enables it, whoever disabled it."""
        changed = {name: form.cleaned_data[name] for name in form.changed_data}
        enabled = changed.pop("enabled", None)
        with transaction.atomic():
            endpoint_staff_update(endpoint=obj, values=changed)
            if enabled is False:
                endpoint_staff_disable(endpoint=obj, by=str(request.user))
            elif enabled is True:
                endpoint_staff_enable(endpoint=obj)
        obj.refresh_from_db()

    @admin.action(description="Disable the selected endpoints", permissions=["change"])
    def disable(self, request, queryset) -> None:
        for endpoint in queryset:
            endpoint_staff_disable(endpoint=endpoint, by=str(request.user))
        messages.success(request, "Disabled: only staff can enable them again.")

    @admin.action(description="Enable the selected endpoints", permissions=["change"])
    def enable(self, request, queryset) -> None:
        for endpoint in queryset:
            endpoint_staff_enable(endpoint=endpoint)
        messages.success(request, "Enabled.")


@admin.register(Delivery)
class DeliveryAdmin(SimpleHistoryAdmin):
    list_display = ("id", "event", "endpoint", "status", "attempt_count", "next_attempt_at")
    list_filter = ("status",)
    search_fields = ("event__event_id", "endpoint__public_id")
    list_select_related = ("event", "endpoint")
    fields = (
        "endpoint",
        "event",
        "status",
        "attempt_count",
        "first_attempt_at",
        "next_attempt_at",
        "last_status_code",
        "created_at",
        "updated_at",
    )
    readonly_fields = fields
    inlines = (AttemptInline,)
    actions = ("retry",)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return request.user.has_perm("webhooks.change_delivery") if obj is None else False

    @admin.action(description="Send the selected deliveries again now", permissions=["change"])
    def retry(self, request, queryset) -> None:
        count = 0
        for delivery in queryset:
            delivery_retry(delivery=delivery)
            count += 1
        messages.success(request, f"{count} deliveries will be sent again.")
