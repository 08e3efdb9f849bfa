"""System checks of the push settings (run by every management command and at start)."""

from __future__ import annotations

from django.conf import settings
from django.core.checks import Error, register


@register()
def retention_settings(app_configs, **kwargs) -> list[Error]:
    """A delivery is deleted with its event: deliveries cannot be kept longer than events."""
    if settings.DELIVERY_RETENTION_DAYS > settings.PUSH_RETENTION_DAYS:
        return [
            Error(
                f"DELIVERY_RETENTION_DAYS ({settings.DELIVERY_RETENTION_DAYS:g}) is longer than "
                f"PUSH_RETENTION_DAYS ({settings.PUSH_RETENTION_DAYS:g}): a delivery goes with its "
                "event, so it cannot be kept longer.",
                hint="Set DELIVERY_RETENTION_DAYS at most PUSH_RETENTION_DAYS.",
                id="webhooks.E001",
            )
        ]
    return []
