"""Django admin for staff and ops: every page answers, edits land where they should, staff
curation survives the metadata refresh, and list pages cost the same whatever the row count."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
from axes.models import AccessAttempt
from django import forms
from django.contrib import admin
from django.contrib.auth.models import Permission, User
from django.db import connection
from django.test import RequestFactory
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django_celery_beat.models import PeriodicTask

from deposits.admin import DepositAdmin
from deposits.models import Deposit, DepositCheckpoint
from deposits.services import deposit_record_events
from lats.models import Avs, FeeStructure, Lat, PriceFeed, SyncStatus, Token
from lats.services import avs_apply_metadata
from metrics.models import MetricSnapshot, RewardSubmission
from operators.models import Operator, StakerNode
from tests import factories as f
from tests.factories import event
from tests.ports import closed_port_url

pytestmark = pytest.mark.django_db

A = f.address
T0 = dt.datetime(2026, 3, 1, tzinfo=dt.UTC)
OUR_APPS = {"lats", "operators", "deposits", "metrics"}


@pytest.fixture
def world(dataset):
    """The data set, plus one row of every model the admin shows that it lacks."""
    SyncStatus.objects.create(lat=dataset.eth_lat, job="state", last_success_at=T0, last_block=120)
    SyncStatus.objects.create(
        lat=dataset.eth_lat,
        job="deposits",
        last_error="ChainUnavailable: the node could not be reached",
        last_error_at=T0,
        consecutive_failures=3,
    )
    PriceFeed.objects.create(
        chain_id=31337, token_address=dataset.nat.address, feed_address=A(0xF1), answer=10**16
    )
    deposit_record_events(lat=dataset.eth_lat, events=[event(10, 0), event(11, 1)])
    DepositCheckpoint.objects.create(
        lat=dataset.eth_lat, block_number=11, block_hash="0x" + "1" * 64
    )
    f.MetricSnapshotFactory(lat=dataset.eth_lat, timestamp=T0, total_assets=1, total_supply=1)
    RewardSubmission.objects.create(
        avs=dataset.avs,
        chain_id=31337,
        tx_hash="0x" + "2" * 64,
        log_index=0,
        block_number=9,
        token=dataset.steth.address,
        amount=10**18,
        start_timestamp=0,
        duration=86400,
        strategies=[A(0x5001)],
    )
    return dataset


def form_data(response) -> dict[str, object]:
    """What the browser would post back from a change page, untouched."""
    data: dict[str, object] = {}

    def add(form) -> None:
        for name, field in form.fields.items():
            bound = form[name]
            value = bound.value()
            if isinstance(field.widget, forms.CheckboxInput):
                if value:
                    data[bound.html_name] = "on"
            elif isinstance(field, forms.MultipleChoiceField):
                data[bound.html_name] = list(value or [])
            elif value is not None:
                data[bound.html_name] = value  # BoundField.value() is already prepared
                if field.show_hidden_initial:  # callable defaults: the page posts it too
                    data[bound.html_initial_name] = value

    add(response.context["adminform"].form)
    for inline in response.context["inline_admin_formsets"]:
        formset = inline.formset
        add(formset.management_form)
        for form in formset.forms:
            add(form)
    return data


def change_url(obj) -> str:
    return reverse(f"admin:{obj._meta.app_label}_{obj._meta.model_name}_change", args=[obj.pk])


def changelist_url(model) -> str:
    return reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")


OUR_MODELS = sorted(
    (m for m in admin.site._registry if m._meta.app_label in OUR_APPS),
    key=lambda m: m._meta.label,
)


def test_every_model_of_ours_is_registered():
    assert {m._meta.label for m in OUR_MODELS} == {
        "lats.Lat",
        "lats.Avs",
        "lats.Token",
        "lats.PriceFeed",
        "lats.SyncStatus",
        "operators.Operator",
        "operators.StakerNode",
        "deposits.Deposit",
        "deposits.DepositCheckpoint",
        "metrics.MetricSnapshot",
        "metrics.RewardSubmission",
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


# --- LAT ----------------------------------------------------------------------------------------


def test_lat_change_page_edits_group_override_and_fees_only(admin_client, world):
    lat = world.native_lat
    url = change_url(lat)
    data = form_data(admin_client.get(url))
    assert "symbol" not in data  # read-only, not posted
    data.update(
        {
            "group_override": "BTC",
            "fee_structure-0-management_fee": "1.25",
            "fee_structure-0-performance_fee": "15",
            "symbol": "HACKED",
        }
    )
    response = admin_client.post(url, data)
    assert response.status_code == 302, response.context["errors"] if response.context else ""
    lat.refresh_from_db()
    assert lat.group_override == "BTC"
    assert lat.group == "BTC"
    assert lat.symbol == "nLAT"
    fees = FeeStructure.objects.get(lat=lat)
    assert (fees.management_fee, fees.performance_fee) == (Decimal("1.25"), Decimal("15"))


def test_lat_list_shows_effective_group_and_sync_status(admin_client, world):
    response = admin_client.get(changelist_url(Lat))
    body = response.content.decode()
    results = {lat.symbol: lat for lat in response.context["cl"].result_list}
    assert set(results) == {"eLAT", "nLAT"}
    assert results["eLAT"].group == "ETH"
    assert results["nLAT"].group == "Native"
    assert "failing (3x since last success)" in body
    assert "ok " in body
    assert "block 120" in body


@pytest.mark.chain
def test_refresh_now_enqueues_on_commit(
    admin_client, imported, eager, django_capture_on_commit_callbacks
):
    lat = Lat.objects.get(symbol="latETH")
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = admin_client.post(
            changelist_url(Lat), {"action": "refresh_now", "_selected_action": [lat.pk]}
        )
    assert response.status_code == 302
    assert len(callbacks) == 1
    assert not SyncStatus.objects.exists()  # nothing ran before the commit
    callbacks[0]()  # the commit: tasks are published (run in-process here)
    statuses = {s.job: s for s in SyncStatus.objects.filter(lat=lat)}
    assert set(statuses) == {"state", "deposits", "snapshot", "metadata"}
    assert all(s.last_success_at and not s.consecutive_failures for s in statuses.values())
    lt = imported.contract("LiquidToken", lat.proxy_address)
    snapshot = MetricSnapshot.objects.get(lat=lat)
    assert int(snapshot.total_supply) == lt.functions.totalSupply().call()
    assert not SyncStatus.objects.exclude(lat=lat).exists()  # only the LAT selected


# --- AVS curation -------------------------------------------------------------------------------


def test_staff_edit_marks_the_field_and_the_refresh_keeps_it(admin_client, world):
    avs = world.avs
    url = change_url(avs)
    data = form_data(admin_client.get(url))
    data["metadata_name"] = "Name chosen by staff"
    data["metadata_messaging"] = "https://t.me/avs"
    response = admin_client.post(url, data)
    assert response.status_code == 302
    avs.refresh_from_db()
    assert avs.staff_edited_fields == ["metadata_name", "metadata_messaging"]
    assert avs.metadata_name == "Name chosen by staff"

    document = {
        "name": "Name in the document",
        "website": "https://document.example",
        "telegram": "https://t.me/document",
    }
    avs_apply_metadata(avs=avs, uri="data:,", document=document, block=50)
    avs.refresh_from_db()
    assert avs.metadata_name == "Name chosen by staff"
    assert avs.metadata_messaging == "https://t.me/avs"
    assert avs.metadata_website == "https://document.example"  # not edited: the document's


def test_save_without_changes_marks_nothing(admin_client, world):
    url = change_url(world.avs)
    assert admin_client.post(url, form_data(admin_client.get(url))).status_code == 302
    world.avs.refresh_from_db()
    assert world.avs.staff_edited_fields == []


def test_release_one_field_from_the_change_page(
    admin_client, world, django_capture_on_commit_callbacks
):
    avs = world.avs
    avs.staff_edited_fields = ["metadata_name", "metadata_website"]
    avs.metadata_updated_block = 40
    avs.save()
    world.eth_lat.avs_directory = A(0xAD)
    world.eth_lat.save()
    url = change_url(avs)
    data = form_data(admin_client.get(url))
    data["release_fields"] = ["metadata_name"]
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        assert admin_client.post(url, data).status_code == 302
    avs.refresh_from_db()
    assert avs.staff_edited_fields == ["metadata_website"]
    assert avs.metadata_updated_block is None  # so that the refresh re-applies the document
    # One refresh queued (the others drop the cached read documents).
    queued = [c for c in callbacks if "enqueue" in getattr(getattr(c, "func", c), "__name__", "")]
    assert len(queued) == 1

    avs_apply_metadata(
        avs=avs, uri="data:,", document={"name": "Doc", "website": "https://doc.example"}, block=41
    )
    avs.refresh_from_db()
    assert (avs.metadata_name, avs.metadata_website) == ("Doc", "https://avs.example")


def test_reset_action_releases_every_field_and_queues_the_refresh(
    admin_client, world, settings, eager, django_capture_on_commit_callbacks
):
    settings.RPC_URL = closed_port_url()
    avs = world.avs
    avs.staff_edited_fields = ["metadata_name", "tags"]
    avs.save()
    world.eth_lat.avs_directory = A(0xAD)
    world.eth_lat.save()
    with django_capture_on_commit_callbacks(execute=True):
        response = admin_client.post(
            changelist_url(Avs),
            {"action": "reset_to_onchain_metadata", "_selected_action": [avs.pk]},
        )
    assert response.status_code == 302
    avs.refresh_from_db()
    assert avs.staff_edited_fields == []
    # The queued metadata refresh ran (against an unreachable node, so it failed and retried).
    status = SyncStatus.objects.get(lat=world.eth_lat, job="metadata")
    assert status.consecutive_failures >= 1


# --- tokens, price feeds, operators -----------------------------------------------------------


def test_token_ref_id_and_base_apy_editable_symbol_not(admin_client, world):
    token = world.usdx
    url = change_url(token)
    data = form_data(admin_client.get(url))
    data.update({"ref_id": "825", "base_apy": "4.5", "symbol": "EVIL", "name": "Evil"})
    assert admin_client.post(url, data).status_code == 302
    token.refresh_from_db()
    assert (token.ref_id, token.base_apy) == (825, Decimal("4.5"))
    assert (token.symbol, token.name) == ("USDx", "Dollar X")


def test_token_list_edits_ref_id(admin_client, world):
    tokens = list(Token.objects.order_by("chain_id", "address"))
    url = changelist_url(Token)
    data = form_data_changelist(admin_client.get(url))
    index = next(i for i, t in enumerate(tokens) if t.pk == world.nat.pk)
    data[f"form-{index}-ref_id"] = "77"
    data["_save"] = "Save"
    assert admin_client.post(url, data).status_code == 302
    assert Token.objects.get(pk=world.nat.pk).ref_id == 77


def form_data_changelist(response) -> dict[str, object]:
    formset = response.context["cl"].formset
    data: dict[str, object] = {}
    for form in [formset.management_form, *formset.forms]:
        for name in form.fields:
            value = form[name].value()
            if value is not None:
                data[form[name].html_name] = value
    return data


def test_price_feed_address_editable_and_checksummed(admin_client, world):
    feed = PriceFeed.objects.get()
    url = change_url(feed)
    data = form_data(admin_client.get(url))
    data["feed_address"] = A(0xF2).lower()
    assert admin_client.post(url, data).status_code == 302
    feed.refresh_from_db()
    assert feed.feed_address == A(0xF2)
    assert feed.token_address == world.nat.address


def test_price_feed_can_be_added(admin_client, world):
    url = reverse("admin:lats_pricefeed_add")
    data = {"chain_id": "31337", "token_address": A(0x6D).lower(), "feed_address": A(0xF3)}
    assert admin_client.post(url, data).status_code == 302
    assert PriceFeed.objects.get(token_address=A(0x6D)).feed_address == A(0xF3)


def test_operator_metadata_editable(admin_client, world):
    operator = world.op2
    url = change_url(operator)
    data = form_data(admin_client.get(url))
    data.update({"metadata_name": "Operator Two", "address": A(0x1)})
    assert admin_client.post(url, data).status_code == 302
    operator.refresh_from_db()
    assert operator.metadata_name == "Operator Two"
    assert operator.address == A(0x902)


# --- deposits at scale ------------------------------------------------------------------------


@pytest.fixture
def thirty_deposits(dataset):
    deposit_record_events(lat=dataset.eth_lat, events=[event(100 + i, 0) for i in range(20)])
    deposit_record_events(lat=dataset.native_lat, events=[event(200 + i, 3) for i in range(10)])
    return dataset


def count_queries_over_deposits(captured) -> list[str]:
    return [
        q["sql"]
        for q in captured.captured_queries
        if "COUNT(" in q["sql"].upper() and "deposits_deposit" in q["sql"]
    ]


def test_deposit_changelist_issues_no_count(admin_client, thirty_deposits, monkeypatch):
    monkeypatch.setattr(DepositAdmin, "list_per_page", 10)
    with CaptureQueriesContext(connection) as captured:
        response = admin_client.get(changelist_url(Deposit) + "?p=2")
    assert response.status_code == 200
    assert count_queries_over_deposits(captured) == []
    cl = response.context["cl"]
    assert cl.result_count == 30
    assert cl.full_result_count is None
    # Newest first: page 2 of 10 holds the 11th..20th newest, seq 20 down to 11.
    assert [d.seq for d in cl.result_list] == list(range(20, 10, -1))
    assert not any("OFFSET" in q["sql"] for q in captured.captured_queries)

    response = admin_client.get(changelist_url(Deposit) + "?p=3&o=0")  # oldest first
    assert [d.seq for d in response.context["cl"].result_list] == list(range(21, 31))


def test_deposit_filtered_list_counts_at_most_the_cap(admin_client, thirty_deposits):
    lat = thirty_deposits.native_lat
    with CaptureQueriesContext(connection) as captured:
        response = admin_client.get(changelist_url(Deposit) + f"?lat__id__exact={lat.pk}")
    assert response.context["cl"].result_count == 10
    counts = count_queries_over_deposits(captured)
    assert len(counts) == 1
    assert "LIMIT 10000" in counts[0]


def test_deposit_search_by_tx_hash_and_sender(admin_client, thirty_deposits):
    target = event(105, 0)
    url = changelist_url(Deposit)
    rows = (
        admin_client.get(url, {"q": target.tx_hash.upper().replace("0X", "0x")})
        .context["cl"]
        .result_list
    )
    assert [(d.tx_hash, d.log_index) for d in rows] == [(target.tx_hash, 0)]
    rows = admin_client.get(url, {"q": A(0xE1).lower()}).context["cl"].result_list
    assert len(rows) == 30  # every deposit of the fixture comes from 0x…e1
    assert list(admin_client.get(url, {"q": "nonsense"}).context["cl"].result_list) == []


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


@pytest.fixture
def viewer(db):
    """Staff who may view every model and change nothing."""
    user = User.objects.create_user("viewer", password="viewer-password-1", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(codename__startswith="view_"))
    return user


@pytest.fixture
def viewer_client(client, viewer):
    client.force_login(viewer)
    return client


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


def test_view_only_staff_cannot_refresh(viewer_client, world, django_capture_on_commit_callbacks):
    lat = world.eth_lat
    page = viewer_client.get(changelist_url(Lat))
    assert page.status_code == 200
    assert b"refresh_now" not in page.content
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = viewer_client.post(
            changelist_url(Lat), {"action": "refresh_now", "_selected_action": [lat.pk]}
        )
    assert response.status_code == 200  # the list again: the action is not offered, not run
    assert callbacks == []
    assert not SyncStatus.objects.filter(lat=lat, job="metadata").exists()


def test_view_only_staff_cannot_reset_metadata(
    viewer_client, world, django_capture_on_commit_callbacks
):
    avs = world.avs
    avs.staff_edited_fields = ["metadata_name"]
    avs.save()
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        viewer_client.post(
            changelist_url(Avs),
            {"action": "reset_to_onchain_metadata", "_selected_action": [avs.pk]},
        )
    assert callbacks == []
    avs.refresh_from_db()
    assert avs.staff_edited_fields == ["metadata_name"]


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
