"""The admins of lats (lats/admin.py): LATs, AVS curation, tokens and price feeds. Edits land
where they should, staff curation survives the metadata refresh, and view-only staff run no
action."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.urls import reverse

from lats.avs_metadata import avs_apply_metadata
from lats.models import Avs, FeeStructure, Lat, PriceFeed, SyncStatus, Token
from metrics.models import MetricSnapshot
from tests import factories as f
from tests.adminpages import change_url, changelist_url, form_data
from tests.ports import closed_port_url

pytestmark = pytest.mark.django_db

A = f.address


# --- LAT ----------------------------------------------------------------------------------------


def test_lat_change_page_edits_settings_never_chain_state(admin_client, world):
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


# --- tokens, price feeds ------------------------------------------------------------------------


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


# --- view-only staff ----------------------------------------------------------------------------


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


# --- curated metadata: validation, tags as a list, logo preview ---------------------------------


def post_avs(client, avs, **changes):
    url = change_url(avs)
    data = form_data(client.get(url))
    data.update(changes)
    return client.post(url, data)


@pytest.mark.parametrize(
    "link", ["ftp://avs.example/file", "javascript:alert(1)", "https://", "not a link at all"]
)
def test_curated_links_must_be_http_urls(admin_client, world, link):
    response = post_avs(admin_client, world.avs, metadata_website=link)
    assert response.status_code == 200  # the form again
    assert "metadata_website" in response.context["adminform"].form.errors
    world.avs.refresh_from_db()
    assert world.avs.metadata_website == "https://avs.example"


@pytest.mark.parametrize("bad", ["0x1234", "0x" + "g" * 40, A(0x70) + "0"])
def test_token_address_must_be_an_address(admin_client, world, bad):
    response = post_avs(admin_client, world.avs, metadata_token_address=bad)
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors["metadata_token_address"]
    assert errors == ["Enter an address 0x + 40 hex digits."]


def test_token_address_is_stored_checksummed(admin_client, world):
    eip55 = "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"  # a test vector of EIP-55
    response = post_avs(admin_client, world.avs, metadata_token_address=f" {eip55.lower()} ")
    assert response.status_code == 302
    world.avs.refresh_from_db()
    assert world.avs.metadata_token_address == eip55


def test_tags_are_edited_as_a_list(admin_client, world):
    avs = world.avs
    page = admin_client.get(change_url(avs)).content.decode()
    assert ">\noracle\nrestaking</textarea>" in page  # one per line (Django adds one newline)
    response = post_avs(admin_client, avs, tags="oracle, AI\n  zk proofs ,\n\nAI\nrestaking")
    assert response.status_code == 302
    avs.refresh_from_db()
    assert avs.tags == ["oracle", "AI", "zk proofs", "restaking"]
    assert avs.staff_edited_fields == ["tags"]

    assert post_avs(admin_client, avs).status_code == 302  # posted back as shown: no change
    avs.refresh_from_db()
    assert avs.tags == ["oracle", "AI", "zk proofs", "restaking"]


@pytest.mark.parametrize(
    "tags", ["x" * 41, "ok\nbad\x07bell", ",".join(f"t{i}" for i in range(21))]
)
def test_bad_tags_are_refused(admin_client, world, tags):
    response = post_avs(admin_client, world.avs, tags=tags)
    assert response.status_code == 200
    assert "tags" in response.context["adminform"].form.errors
    world.avs.refresh_from_db()
    assert world.avs.tags == ["oracle", "restaking"]


def test_logo_shows_as_an_image_only_for_http_links(admin_client, world):
    avs = world.avs
    page = admin_client.get(change_url(avs)).content.decode()
    assert '<img src="https://avs.example/logo.png" alt="logo of Example AVS"' in page
    Avs.objects.filter(pk=avs.pk).update(metadata_logo="javascript:alert(1)")
    page = admin_client.get(change_url(avs)).content.decode()
    assert "<img src=" not in page
    assert "javascript:alert" not in page.split('name="metadata_logo"')[0]


# --- history: who changed what ------------------------------------------------------------------


def test_staff_edit_is_kept_with_who_and_when(admin_client, admin_user, world):
    avs = world.avs
    before = avs.history.count()
    assert post_avs(admin_client, avs, metadata_website="https://new.example").status_code == 302
    latest = avs.history.latest()
    assert avs.history.count() == before + 1
    assert (latest.metadata_website, latest.history_user) == ("https://new.example", admin_user)
    assert latest.history_type == "~"
    page = admin_client.get(reverse("admin:lats_avs_history", args=[avs.pk])).content.decode()
    assert admin_user.username in page
    assert "https://new.example" in page


def test_fee_and_base_yield_changes_are_in_the_history(admin_client, admin_user, world):
    lat, token = world.native_lat, world.usdx
    data = form_data(admin_client.get(change_url(lat)))
    data.update({"fee_structure-0-management_fee": "2", "fee_structure-0-performance_fee": "10"})
    assert admin_client.post(change_url(lat), data).status_code == 302
    fees = FeeStructure.objects.get(lat=lat)
    assert [(h.management_fee, h.history_user) for h in fees.history.all()] == [
        (Decimal("2"), admin_user)
    ]
    assert (
        admin_client.get(reverse("admin:lats_feestructure_history", args=[fees.pk])).status_code
        == 200
    )
    data = form_data(admin_client.get(change_url(token)))
    data["base_apy"] = "4.5"
    assert admin_client.post(change_url(token), data).status_code == 302
    assert token.history.latest().base_apy == Decimal("4.5")
    assert token.history.latest().history_user == admin_user


def test_price_feed_answers_from_the_refresh_are_not_history(admin_client, admin_user, world):
    feed = PriceFeed.objects.get()
    rows = feed.history.count()
    assert rows == 1  # its creation
    feed.answer, feed.decimals = 2 * 10**16, 8
    feed.save(update_fields=["answer", "decimals", "updated_at"])  # what the state refresh saves
    assert feed.history.count() == rows
    data = form_data(admin_client.get(change_url(feed)))
    data["feed_address"] = A(0xF9)
    assert admin_client.post(change_url(feed), data).status_code == 302
    latest = feed.history.latest()
    assert (feed.history.count(), latest.feed_address, latest.history_user) == (
        rows + 1,
        A(0xF9),
        admin_user,
    )
