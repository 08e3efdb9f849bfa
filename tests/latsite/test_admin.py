"""The admin site as a whole: every app's models, and the third-party admins core/admin_site.py
re-registers. Every page answers, chain rows stay read-only, list and change pages cost the
same whatever the row count, and every action asks for a permission."""

from __future__ import annotations

import datetime as dt

import pytest
from axes.models import AccessAttempt
from django.contrib import admin
from django.contrib.auth.models import Permission, User
from django.db import connection
from django.test import RequestFactory
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django_celery_beat.models import PeriodicTask

from activity.store import activity_record
from deposits.models import Deposit, DepositCheckpoint
from deposits.services import deposit_record_events
from lats.models import Avs, Lat, PriceFeed, SyncStatus, Token
from metrics.models import AvsDay, AvsEvent, LatDay, RewardSubmission, UsdPrice
from operators.models import Operator, StakerNode
from tests import factories as f
from tests.adminpages import change_url, changelist_url
from tests.factories import event

pytestmark = pytest.mark.django_db

A = f.address
T0 = dt.datetime(2026, 3, 1, tzinfo=dt.UTC)
OUR_APPS = {"lats", "operators", "deposits", "metrics"}
OUR_MODELS = sorted(
    (m for m in admin.site._registry if m._meta.app_label in OUR_APPS),
    key=lambda m: m._meta.label,
)


def test_every_model_of_ours_is_registered():
    assert {m._meta.label for m in OUR_MODELS} == {
        "lats.Lat",
        "lats.Avs",
        "lats.FeeStructure",
        "lats.Token",
        "lats.PriceFeed",
        "lats.SyncStatus",
        "operators.Operator",
        "operators.StakerNode",
        "deposits.Deposit",
        "deposits.DepositCheckpoint",
        "deposits.Event",
        "deposits.Holder",
        "deposits.HolderTally",
        "metrics.MetricSnapshot",
        "metrics.RewardSubmission",
        "metrics.AvsEvent",
        "metrics.AvsDay",
        "metrics.LatDay",
        "metrics.UsdPrice",
    }


@pytest.mark.parametrize("model", OUR_MODELS, ids=lambda m: m._meta.label)
def test_changelist_and_change_page_answer(admin_client, world, model):
    assert model.objects.exists()
    assert admin_client.get(changelist_url(model)).status_code == 200
    for obj in model.objects.all()[:3]:
        assert admin_client.get(change_url(obj)).status_code == 200


def test_schedules_admin_answers(admin_client):
    task = PeriodicTask.objects.get(name="lat-state-refresh")
    assert admin_client.get(changelist_url(PeriodicTask)).status_code == 200
    assert admin_client.get(change_url(task)).status_code == 200


def test_chain_rows_cannot_be_added_or_edited(admin_client, world):
    for model in (Lat, Avs, Token, Operator):
        add = reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_add")
        assert admin_client.get(add).status_code == 403
    deposit = Deposit.objects.first()
    response = admin_client.post(change_url(deposit), {"amount": "1"})
    assert response.status_code == 403
    assert Deposit.objects.get(pk=deposit.pk).amount == deposit.amount


# --- no N+1 -------------------------------------------------------------------------------------


def grow(dataset, n: int) -> None:
    for _ in range(n):
        lat = f.LatFactory(avs=dataset.avs)
        f.LatTokenFactory(lat=lat)
        f.FeeStructureFactory(lat=lat)
        SyncStatus.objects.create(lat=lat, job="state", last_success_at=T0, last_block=1)
        SyncStatus.objects.create(lat=lat, job="deposits", consecutive_failures=2)
        operator = f.OperatorFactory()
        node = f.StakerNodeFactory(lat=lat, operator=operator)
        f.NodeAssetFactory(
            node=node, token=dataset.steth, strategy_address=A(0x5001), core_shares=1
        )
        f.MetricSnapshotFactory(lat=lat, timestamp=T0, total_assets=1, total_supply=1)
        f.AvsFactory()
        f.TokenFactory()
        PriceFeed.objects.create(
            chain_id=31337, token_address=f.TokenFactory().address, feed_address=A(0xF1)
        )
        DepositCheckpoint.objects.create(lat=lat, block_number=1, block_hash="0x" + "2" * 64)
        RewardSubmission.objects.create(
            avs=lat.avs,
            chain_id=31337,
            tx_hash=f"0x{lat.id:064x}",
            log_index=1,
            block_number=1,
            token=dataset.steth.address,
            amount=1,
            start_timestamp=0,
            duration=1,
            strategies=[],
        )
        AvsEvent.objects.create(
            avs=lat.avs,
            kind=AvsEvent.Kind.REGISTRATION,
            name="OperatorAVSRegistrationStatusUpdated",
            chain_id=31337,
            tx_hash=f"0x{lat.id:064x}",
            log_index=2,
            block_number=1,
            block_hash="0x" + "2" * 64,
            block_timestamp=0,
            operator=operator.address,
            value=1,
        )
        day = T0.date() + dt.timedelta(days=lat.id)
        avs = f.AvsFactory()
        AvsDay.objects.create(avs=avs, day=day, block_number=1, block_hash="0x" + "2" * 64)
        LatDay.objects.create(
            lat=lat, day=day, block_number=1, block_hash="0x" + "2" * 64, total_assets=1,
            total_supply=1,
        )  # fmt: skip
        UsdPrice.objects.create(
            chain_id=10**6 + lat.id, feed_address=A(0xF2), answer=1, decimals=8, block_number=1,
            updated_at=T0,
        )  # fmt: skip
        # A mint to a new holder: an event, a holder and the LAT's tally.
        activity_record(
            lat=lat, logs=[f.transfer_log(1, 0, A(0), A(0xB000 + lat.id), 1)], timestamps={1: 0}
        )
    top = Deposit.objects.count()
    deposit_record_events(lat=dataset.eth_lat, events=[event(1000 + top + i, 0) for i in range(n)])


@pytest.mark.parametrize("model", OUR_MODELS, ids=lambda m: m._meta.label)
def test_changelist_queries_do_not_grow_with_rows(admin_client, dataset, model):
    url = changelist_url(model)
    grow(dataset, 2)
    admin_client.get(url)  # warm the session and content types
    with CaptureQueriesContext(connection) as few:
        assert admin_client.get(url).status_code == 200
    grow(dataset, 5)
    with CaptureQueriesContext(connection) as many:
        assert admin_client.get(url).status_code == 200
    assert model.objects.count() >= 7
    assert len(many) == len(few), [q["sql"] for q in many.captured_queries]


@pytest.mark.parametrize("model", [Lat, Operator, StakerNode], ids=lambda m: m._meta.label)
def test_change_page_queries_do_not_grow_with_inline_rows(admin_client, dataset, model):
    grow(dataset, 1)
    obj = {Lat: dataset.eth_lat, Operator: dataset.op1, StakerNode: dataset.node0}[model]
    admin_client.get(change_url(obj))
    with CaptureQueriesContext(connection) as few:
        assert admin_client.get(change_url(obj)).status_code == 200
    for _ in range(4):  # more inline rows under the same object
        SyncStatus.objects.get_or_create(lat=dataset.eth_lat, job="metadata")
        f.LatTokenFactory(lat=dataset.eth_lat)
        f.StakerNodeFactory(lat=dataset.eth_lat, operator=dataset.op1)
        f.NodeAssetFactory(
            node=dataset.node0, token=f.TokenFactory(), strategy_address=A(0x5009), core_shares=1
        )
    with CaptureQueriesContext(connection) as many:
        assert admin_client.get(change_url(obj)).status_code == 200
    assert len(many) == len(few), [q["sql"] for q in many.captured_queries]


# --- every action asks for a permission ---------------------------------------------------------


def staff_with(*perms: str):
    user = User.objects.create_user("editor", is_staff=True)
    for perm in perms:
        app_label, codename = perm.split(".")
        user.user_permissions.add(
            Permission.objects.get(content_type__app_label=app_label, codename=codename)
        )
    return User.objects.get(pk=user.pk)  # fresh: no permission cache


def actions_for(user, model) -> set[str]:
    request = RequestFactory().get("/admin/")
    request.user = user
    return set(admin.site._registry[model].get_actions(request))


def test_view_only_staff_get_no_action_anywhere(viewer):
    request = RequestFactory().get("/admin/")
    request.user = viewer
    registry = admin.site._registry
    assert {Lat, Avs, PeriodicTask, AccessAttempt} <= set(registry)
    for model, model_admin in registry.items():
        assert model_admin.has_view_permission(request), model._meta.label
        assert model_admin.get_actions(request) == {}, model._meta.label


@pytest.mark.parametrize(
    ("model", "perm", "actions"),
    [
        (Lat, "lats.change_lat", {"refresh_now"}),
        (Avs, "lats.change_avs", {"reset_to_onchain_metadata"}),
        (
            PeriodicTask,
            "django_celery_beat.change_periodictask",
            {"enable_tasks", "disable_tasks", "toggle_tasks", "run_tasks"},
        ),
        (
            AccessAttempt,
            "axes.delete_accessattempt",
            {"cleanup_expired_attempts", "delete_selected"},
        ),
    ],
    ids=["lat", "avs", "schedule", "login-attempt"],
)
def test_actions_need_their_permission(db, model, perm, actions):
    app_label = model._meta.app_label
    view = f"{app_label}.view_{model._meta.model_name}"
    assert actions_for(staff_with(view), model) == set()
    User.objects.filter(username="editor").delete()
    assert actions_for(staff_with(view, perm), model) == actions


@pytest.mark.parametrize("action", ["disable_tasks", "toggle_tasks", "run_tasks"])
def test_view_only_staff_cannot_touch_schedules(viewer_client, action):
    task = PeriodicTask.objects.get(name="lat-state-refresh")
    assert task.enabled
    viewer_client.post(
        changelist_url(PeriodicTask), {"action": action, "_selected_action": [task.pk]}
    )
    task.refresh_from_db()
    assert task.enabled
    assert task.total_run_count == 0
