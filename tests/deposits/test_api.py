"""GET /metrics/deposits: order, paging, filters, totals."""

from __future__ import annotations

import base64
import dataclasses
from datetime import UTC, datetime
from types import SimpleNamespace

import pytest
from django.db import connection

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
    assert body["meta"] == {"total": 5, "skip": 0, "take": 12, "next": None}
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
        "transactionHash": "0x" + "0" * 31 + "b" + "0" * 31 + "5",  # block 11, log 5
        "logIndex": 5,
    }


@pytest.mark.parametrize("vendor", ["postgresql", "sqlite"])
def test_amounts_and_times_written_exactly_on_either_path(api, dataset, monkeypatch, vendor):
    """PostgreSQL writes amounts and times as text in the statement; the demo's SQLite path
    converts them in Python (run here on PostgreSQL by making the selector see another
    vendor). Both as worked out by hand: every digit of a uint256, microseconds only when the
    time has some, in UTC."""
    from datetime import timedelta, timezone

    from deposits import selectors

    top = 2**256 - 1
    precise = dataclasses.replace(
        event(20, 0, amount=top, shares=1),
        created_at=datetime(2026, 3, 1, 9, 30, 5, 120, tzinfo=timezone(timedelta(hours=2))),
    )
    whole = dataclasses.replace(
        event(21, 0, amount=0, shares=10**77),
        created_at=datetime(2026, 12, 31, 23, 59, 59, tzinfo=UTC),
    )
    deposit_record_events(lat=dataset.eth_lat, events=[precise, whole])
    if vendor == "sqlite":
        demo = SimpleNamespace(vendor="sqlite", cursor=connection.cursor)
        monkeypatch.setattr(selectors, "connection", demo)
    rows = api.get("/metrics/deposits").json()["data"]
    assert [(r["amount"], r["shares"], r["createdAt"]) for r in rows] == [
        ("0", "1" + "0" * 77, "2026-12-31T23:59:59Z"),
        (str(top), "1", "2026-03-01T07:30:05.000120Z"),
    ]


def test_paging(api, deposits):
    body = api.get("/metrics/deposits?skip=1&take=2").json()
    assert amounts(body) == ["3", "4"]
    assert {k: v for k, v in body["meta"].items() if k != "next"} == {
        "total": 5,
        "skip": 1,
        "take": 2,
    }
    assert body["meta"]["next"] is not None  # two more follow
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
    # The cursor names the last record: block 10, log 1, on the dataset's chain.
    chain_id = deposits.eth_lat.chain_id
    cursor = base64.urlsafe_b64encode(f"d1:10:1:{chain_id}".encode()).decode().rstrip("=")
    assert body["meta"] == {"total": 3, "skip": 1, "take": 1, "next": cursor}


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


def walk(api, query: str) -> list[str]:
    """Every page of the listing by cursor: the amounts, in order."""
    seen: list[str] = []
    body = api.get(f"/metrics/deposits?{query}").json()
    while True:
        seen += amounts(body)
        if body["meta"]["next"] is None:
            return seen
        body = api.get(f"/metrics/deposits?{query}&cursor={body['meta']['next']}").json()


def test_cursor_paging_walks_every_deposit_once(api, deposits):
    assert walk(api, "take=2") == ["5", "3", "4", "2", "1"]
    assert walk(api, "take=1") == ["5", "3", "4", "2", "1"]
    assert walk(api, f"take=1&asset={A(0x7A)}") == ["5", "4"]
    assert walk(api, f"take=2&liquidTokenAddress={A(0x1001)}") == ["3", "2", "1"]


def test_cursor_page_does_not_move_when_deposits_arrive_at_the_head(api, deposits):
    first = api.get("/metrics/deposits?take=2").json()
    assert amounts(first) == ["5", "3"]
    deposit_record_events(lat=deposits.eth_lat, events=[event(14, 0, amount=6)])  # newest
    rest = api.get(f"/metrics/deposits?take=2&cursor={first['meta']['next']}").json()
    assert amounts(rest) == ["4", "2"]  # skip=2 would now repeat "3"
    assert rest["meta"]["total"] == 6
    assert amounts(api.get("/metrics/deposits?take=2&skip=2").json()) == ["3", "4"]


@pytest.mark.parametrize(
    "cursor", ["", "x", "ZDI6MTA6MDozMTMzNw", "ZDE6LTE6MDox", "ZDE6MTA6MDozMTMzNw==", "%FF"]
)
def test_a_cursor_the_service_did_not_make_is_a_422(api, deposits, cursor):
    response = api.get(f"/metrics/deposits?cursor={cursor}")
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "unprocessable_entity"
    assert "cursor" in response.json()["error"]["message"]


def test_cursor_with_a_non_zero_skip_is_a_422(api, deposits):
    next_cursor = api.get("/metrics/deposits?take=2").json()["meta"]["next"]
    response = api.get(f"/metrics/deposits?skip=1&cursor={next_cursor}")
    assert response.status_code == 422
    assert "skip" in response.json()["error"]["message"]
    assert api.get(f"/metrics/deposits?skip=0&cursor={next_cursor}").status_code == 200
