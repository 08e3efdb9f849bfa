"""The two kinds of staff (lats/migrations/0004_staff_groups.py): curators edit AVS metadata and
nothing else; ops run schedules, API keys, fees, price feeds, base yields and "Refresh now"."""

from __future__ import annotations

import pytest
from django.apps import apps
from django.contrib import admin
from django.contrib.auth.models import Group
from django.test import Client, RequestFactory
from django.urls import reverse
from django_celery_beat.models import CrontabSchedule, IntervalSchedule, PeriodicTask
from rest_framework_api_key.models import APIKey

from lats.models import Avs, FeeStructure, Lat, PriceFeed, SyncStatus, Token
from tests.adminpages import change_url, changelist_url, form_data

pytestmark = pytest.mark.django_db

BEAT_MODELS = ("periodictask", "crontabschedule", "intervalschedule", "solarschedule")
CURATORS = {"lats.view_avs", "lats.change_avs"}
OPS = {
    *(
        f"django_celery_beat.{a}_{m}"
        for m in (*BEAT_MODELS, "clockedschedule")
        for a in ("view", "add", "change", "delete")
    ),
    "rest_framework_api_key.view_apikey",
    "rest_framework_api_key.add_apikey",
    "rest_framework_api_key.change_apikey",
    "rest_framework_api_key.delete_apikey",
    "lats.view_syncstatus",
    "lats.view_lat",
    "lats.change_lat",
    "lats.view_feestructure",
    "lats.add_feestructure",
    "lats.change_feestructure",
    "lats.view_pricefeed",
    "lats.add_pricefeed",
    "lats.change_pricefeed",
    "lats.view_token",
    "lats.change_token",
}


def group_perms(name: str) -> set[str]:
    return {
        f"{p.content_type.app_label}.{p.codename}"
        for p in Group.objects.get(name=name).permissions.select_related("content_type")
    }


def client_of(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_groups_have_exactly_their_permissions(staff_groups):
    assert group_perms("curators") == CURATORS
    assert group_perms("ops") == OPS


def test_migration_is_idempotent_and_reversible(staff_groups):
    staff_groups.create_groups(apps, None)  # again: the same groups, the same permissions
    assert Group.objects.filter(name__in=("curators", "ops")).count() == 2
    assert (group_perms("curators"), group_perms("ops")) == (CURATORS, OPS)
    extra = Group.objects.create(name="auditors")
    staff_groups.delete_groups(apps, None)
    assert list(Group.objects.values_list("name", flat=True)) == [extra.name]
    staff_groups.create_groups(apps, None)
    assert group_perms("ops") == OPS


def test_curator_edits_avs_but_not_fees_keys_or_schedules(staff_member, world):
    curator = client_of(staff_member("cora", "curators"))
    assert curator.get(change_url(world.avs)).status_code == 200
    fees, _ = FeeStructure.objects.update_or_create(
        lat=world.eth_lat, defaults={"management_fee": 1}
    )
    assert curator.get(change_url(fees)).status_code == 403
    response = curator.post(change_url(fees), {"management_fee": "50", "performance_fee": "0"})
    assert response.status_code == 403
    assert FeeStructure.objects.get(pk=fees.pk).management_fee == 1
    for model in (APIKey, PeriodicTask, SyncStatus, PriceFeed, Token, Lat):
        assert curator.get(changelist_url(model)).status_code == 403, model


def test_ops_open_schedules_keys_status_fees_feeds_and_yields(staff_member, world):
    ops_user = staff_member("otto", "ops")
    ops = client_of(ops_user)
    for model in (
        PeriodicTask,
        CrontabSchedule,
        IntervalSchedule,
        APIKey,
        SyncStatus,
        FeeStructure,
        PriceFeed,
        Token,
        Lat,
    ):
        assert ops.get(changelist_url(model)).status_code == 200, model
    assert ops.get(reverse("admin:rest_framework_api_key_apikey_add")).status_code == 200
    assert (
        ops.get(change_url(PeriodicTask.objects.get(name="lat-state-refresh"))).status_code == 200
    )
    assert ops.get(changelist_url(Avs)).status_code == 403  # curated metadata is the curators'

    token = world.usdx
    data = form_data(ops.get(change_url(token)))
    data["base_apy"] = "3.25"
    assert ops.post(change_url(token), data).status_code == 302
    token.refresh_from_db()
    assert str(token.base_apy) == "3.250000"

    request = RequestFactory().get("/admin/")
    request.user = ops_user
    assert "refresh_now" in admin.site._registry[Lat].get_actions(request)
