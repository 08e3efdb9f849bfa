"""The admins of deposits (deposits/admin.py): the deposit list at scale pages without a
COUNT or an OFFSET, and searches by transaction hash and sender."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from deposits.admin import DepositAdmin
from deposits.models import Deposit
from deposits.services import deposit_record_events
from tests import factories as f
from tests.adminpages import changelist_url
from tests.factories import event

pytestmark = pytest.mark.django_db

A = f.address


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
    # Newest first: page 2 of 10 holds the 11th..20th newest (sorted here).
    keys = sorted(Deposit.objects.values_list("block_number", "log_index"), reverse=True)
    assert [(d.block_number, d.log_index) for d in cl.result_list] == keys[10:20]

    response = admin_client.get(changelist_url(Deposit) + "?p=3")
    assert [(d.block_number, d.log_index) for d in response.context["cl"].result_list] == keys[20:]


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


def test_events_and_holders_are_searchable_by_hash_and_address(admin_client, world):
    from deposits.models import Event, Holder

    a1, a2 = f.address(0xA1), f.address(0xA2)
    transfer = Event.objects.get(type="transfer")
    url = changelist_url(Event)
    by_hash = admin_client.get(url, {"q": transfer.tx_hash.upper().replace("0X", "0x")})
    assert list(by_hash.context["cl"].result_list) == [transfer]
    by_address = admin_client.get(url, {"q": a2.lower()})
    assert list(by_address.context["cl"].result_list) == [transfer]
    by_minter = admin_client.get(url, {"q": a1})
    assert {e.type for e in by_minter.context["cl"].result_list} == {"mint", "transfer"}
    holders = admin_client.get(changelist_url(Holder), {"q": a1}).context["cl"].result_list
    # 5 minted to a1, 2 sent on to a2.
    assert [(h.address, int(h.balance)) for h in holders] == [(a1.lower(), 3)]
    assert (
        admin_client.get(changelist_url(Holder), {"q": "nonsense"}).context["cl"].result_count == 0
    )
