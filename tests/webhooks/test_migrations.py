"""Migration webhooks 0004 on stored endpoints: who disabled each disabled endpoint is filled
from the reason written when it was disabled."""

from __future__ import annotations

import pytest
from rest_framework_api_key.models import APIKey

from tests.migrating import leaves, migrate
from webhooks.models import Endpoint
from webhooks.signing import secret_new

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.xdist_group("migrations")]

BEFORE = [("webhooks", "0003_delivery_lease")]


def test_who_disabled_each_endpoint_is_filled_from_its_reason():
    key, _ = APIKey.objects.create_key(name="migration")
    rows = {
        "enabled": (True, ""),
        "staff": (False, "Disabled by ops@example.com."),
        "service": (False, "Every delivery failed for 3 days."),
        "paused": (False, "Paused by its API key."),
        "paused-unexplained": (False, ""),
    }
    for name, (enabled, reason) in rows.items():
        Endpoint.objects.create(
            public_id=f"wh_{name}",
            api_key=key,
            url="https://example.com/hook",
            secret=secret_new(),
            enabled=enabled,
            disabled_reason=reason,
        )
    try:
        migrate(BEFORE)  # the column goes
        migrate(leaves())  # and comes back, filled by the migration
        filled = dict(Endpoint.objects.values_list("public_id", "disabled_by"))
        assert filled == {
            "wh_enabled": "",
            "wh_staff": "staff",
            "wh_service": "service",
            "wh_paused": "key",
            "wh_paused-unexplained": "key",
        }
    finally:
        migrate(leaves())
