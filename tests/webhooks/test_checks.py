"""The push settings' system check: deliveries cannot be kept longer than their events."""

from __future__ import annotations

from webhooks.checks import retention_settings


def test_deliveries_kept_longer_than_events_is_an_error(settings):
    settings.PUSH_RETENTION_DAYS, settings.DELIVERY_RETENTION_DAYS = 30, 14
    assert retention_settings(None) == []
    settings.DELIVERY_RETENTION_DAYS = 31
    (error,) = retention_settings(None)
    assert error.id == "webhooks.E001"
    assert "DELIVERY_RETENTION_DAYS (31)" in error.msg
