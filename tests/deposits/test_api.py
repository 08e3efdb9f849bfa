"""GET /metrics/deposits: order, paging, filters, totals."""

from __future__ import annotations

import pytest

from deposits.services import deposit_record_events
from tests import factories as f
from tests.factories import event

pytestmark = pytest.mark.django_db

A = f.address


@pytest.fixture
def deposits(dataset):
    # eLAT: blocks 10 (two logs), 12; nLAT: block 11 (log 5), 13.
    deposit_record_events(
        lat=dataset.eth_lat,
        events=[
            event(10, 0, amount=1),
            event(10, 1, sender=0xE3, amount=2, asset=0x6D),
            event(12, 0, amount=3),
        ],
    )
    deposit_record_events(
        lat=dataset.native_lat,
        events=[
            event(11, 5, receiver=0xE4, amount=4, asset=0x7A),
            event(13, 2, amount=5, asset=0x7A),
        ],
    )
    return dataset


def amounts(body) -> list[str]:
    return [row["amount"] for row in body["data"]]


def test_listing_is_newest_first_with_exact_records(api, deposits):
    response = api.get("/metrics/deposits")
    assert response.status_code == 200
    body = response.json()
    assert body["meta"] == {"total": 5, "skip": 0, "take": 12}
    assert amounts(body) == ["5", "3", "4", "2", "1"]
    assert body["data"][2] == {
        "sender": A(0xE1),
        "receiver": A(0xE4),
        "asset": A(0x7A),
        "liquidTokenAddress": A(0x1002),
        "amount": "4",
        "shares": "1000000000000000000",
        "createdAtBlock": 11,
        "createdAt": "2026-03-01T00:02:12Z",
    }


def test_paging(api, deposits):
    body = api.get("/metrics/deposits?skip=1&take=2").json()
    assert amounts(body) == ["3", "4"]
    assert body["meta"] == {"total": 5, "skip": 1, "take": 2}
    assert api.get("/metrics/deposits?skip=4&take=2").json()["data"][0]["amount"] == "1"
    beyond = api.get("/metrics/deposits?skip=5").json()
    assert beyond["data"] == []
    assert beyond["meta"]["total"] == 5


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        (f"liquidTokenAddress={A(0x1001)}", ["3", "2", "1"]),
        (f"liquidTokenAddress={A(0x1002).lower()}", ["5", "4"]),
        (f"sender={A(0xE3)}", ["2"]),
        (f"receiver={A(0xE4)}", ["4"]),
        (f"asset={A(0x7A)}", ["5", "4"]),
        (f"asset={A(0x7A)}&receiver={A(0xE2)}", ["5"]),
        (f"liquidTokenAddress={A(0x1009)}", []),
    ],
)
def test_filters(api, deposits, query, expected):
    body = api.get(f"/metrics/deposits?{query}").json()
    assert amounts(body) == expected
    assert body["meta"]["total"] == len(expected)


def test_filtered_paging(api, deposits):
    body = api.get(f"/metrics/deposits?liquidTokenAddress={A(0x1001)}&skip=1&take=1").json()
    assert amounts(body) == ["2"]
    assert body["meta"] == {"total": 3, "skip": 1, "take": 1}


def test_out_of_order_insert_keeps_listing_order(api, deposits):
    # A backfill of an older block lands between existing deposits.
    deposit_record_events(
        lat=deposits.eth_lat, events=[event(9, 0, amount=9), event(11, 7, amount=8)]
    )
    body = api.get("/metrics/deposits").json()
    assert amounts(body) == ["5", "3", "8", "4", "2", "1", "9"]
    assert body["meta"]["total"] == 7
    assert amounts(api.get("/metrics/deposits?skip=2&take=3").json()) == ["8", "4", "2"]


def test_recording_twice_adds_nothing(api, deposits):
    assert deposit_record_events(lat=deposits.eth_lat, events=[event(10, 0, amount=1)]) == 0
    assert api.get("/metrics/deposits").json()["meta"]["total"] == 5
