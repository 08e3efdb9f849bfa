"""The activity endpoints' contract without a chain: orders and ties worked out by hand, bad
input, and the holders' rollback arithmetic."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from activity import selectors as activity_selectors
from activity.store import activity_record, activity_remove_from_block
from chain.activity import ActivityLog
from deposits.models import HolderTally
from tests import factories as f

pytestmark = pytest.mark.django_db

A = f.address
Z = A(0)


def log(block: int, index: int, kind: str, **args) -> ActivityLog:
    return ActivityLog(
        type=kind,
        event=kind,
        tx_hash=f"0x{block:032x}{index:032x}",
        log_index=index,
        block_number=block,
        block_hash=f"0x{block:064x}",
        args=args,
    )


@pytest.fixture
def lat(dataset):
    activity_record(
        lat=dataset.eth_lat,
        logs=[
            f.transfer_log(10, 0, Z, A(0xB2), 7),
            f.transfer_log(10, 1, Z, A(0xA1), 7),  # ties with 0xB2: lower hex first
            f.transfer_log(11, 0, Z, A(0xC3), 9),
            f.transfer_log(12, 3, A(0xC3), A(0xD4), 9),  # 0xC3 empties its balance
            f.transfer_log(13, 0, A(0xA1), Z, 2),  # a burn: 0xA1 keeps 5
            log(13, 1, "paused", account=A(0xF0)),
        ],
        timestamps={10: 1_700_000_000, 11: 1_700_000_012, 12: 1_700_000_024, 13: 1_700_000_036},
    )
    return dataset.eth_lat


def test_holders_by_balance_then_lower_case_address(api, lat):
    body = api.get(f"/lat/{lat.proxy_address}/holders").json()
    assert body["data"] == [
        {"address": A(0xD4), "balance": "9"},
        {"address": A(0xB2), "balance": "7"},
        {"address": A(0xA1), "balance": "5"},
    ]
    assert body["meta"] == {"total": 3, "skip": 0, "take": 12}
    page = api.get(f"/lat/{lat.proxy_address}/holders", {"skip": 1, "take": 1}).json()
    assert page["data"] == [{"address": A(0xB2), "balance": "7"}]
    assert page["meta"]["total"] == 3


def test_feed_hides_mints_and_burns_and_pages_newest_first(api, lat):
    body = api.get(f"/lat/{lat.proxy_address}/events", {"take": 1}).json()
    assert [(e["type"], e["blockNumber"], e["logIndex"]) for e in body["data"]] == [
        ("paused", 13, 1)
    ]
    assert body["data"][0]["blockTimestamp"] == "2023-11-14T22:13:56Z"  # 1_700_000_036
    rest = api.get(f"/lat/{lat.proxy_address}/events", {"cursor": body["meta"]["next"]}).json()
    assert [(e["type"], e["blockNumber"]) for e in rest["data"]] == [("transfer", 12)]
    assert rest["meta"]["next"] is None


# The feed of the fixture: mints (10, 0), (10, 1), (11, 0) and the burn (13, 0) are not in it.
FEED = [("paused", 13, 1), ("transfer", 12, 3)]


@pytest.mark.parametrize("vendor", ["postgresql", "sqlite"])
@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({}, FEED),
        ({"type": "transfer"}, FEED[1:]),
        ({"type": "paused,transfer,deposit"}, FEED),
        ({"type": "deposit"}, []),
        ({"fromBlock": "13"}, FEED[:1]),
        ({"toBlock": "12"}, FEED[1:]),
        ({"fromBlock": "12", "toBlock": "12"}, FEED[1:]),
        ({"fromBlock": "14"}, []),
        ({"toBlock": "11"}, []),
    ],
)
def test_feed_filters_on_either_path(api, lat, monkeypatch, vendor, query, expected):
    """The one-statement page (PostgreSQL) and the ORM's (the SQLite demo, run here on
    PostgreSQL by making the selector see another vendor) serve the same filtered feed."""
    if vendor == "sqlite":
        monkeypatch.setattr(activity_selectors, "connection", SimpleNamespace(vendor="sqlite"))
    body = api.get(f"/lat/{lat.proxy_address}/events", query).json()
    assert [(e["type"], e["blockNumber"], e["logIndex"]) for e in body["data"]] == expected
    assert body["meta"]["next"] is None
    args = {
        "paused": {"account": A(0xF0)},
        "transfer": {"from": A(0xC3), "to": A(0xD4), "value": "9"},
    }
    assert [e["args"] for e in body["data"]] == [args[kind] for kind, _, _ in expected]


@pytest.mark.parametrize("vendor", ["postgresql", "sqlite"])
def test_a_lat_without_events_has_an_empty_feed(api, dataset, monkeypatch, vendor):
    if vendor == "sqlite":
        monkeypatch.setattr(activity_selectors, "connection", SimpleNamespace(vendor="sqlite"))
    body = api.get(f"/lat/{dataset.native_lat.proxy_address}/events").json()
    assert body == {"data": [], "meta": {"next": None}}
    assert api.get(f"/lat/{A(0x9999)}/events").status_code == 404


def test_rollback_restores_balances_and_tally(api, lat):
    # Blocks 12 and 13 orphaned: 0xC3 holds its 9 again, 0xD4 never held, 0xA1 has 7.
    activity_remove_from_block(lat=lat, block_number=12)
    body = api.get(f"/lat/{lat.proxy_address}/holders").json()
    assert body["data"] == [
        {"address": A(0xC3), "balance": "9"},
        {"address": A(0xA1), "balance": "7"},
        {"address": A(0xB2), "balance": "7"},
    ]
    tally = HolderTally.objects.get(lat=lat)
    assert (tally.holders, tally.ever) == (3, 3)


@pytest.mark.parametrize(
    ("path", "query", "status"),
    [
        ("/lat/0x123/holders", {}, 422),
        ("/lat/0x123/events", {}, 422),
        ("/lat/0x123/status", {}, 422),
        ("/wallets/0x123", {}, 422),
        ("/wallets/not-an-address", {}, 422),
        (f"/lat/{A(0x9999)}/holders", {}, 404),
        (f"/lat/{A(0x9999)}/events", {}, 404),
        (f"/lat/{A(0x9999)}/status", {}, 404),
        ("/lat/{lat}/events", {"type": "transfer,mint"}, 422),
        ("/lat/{lat}/events", {"type": ""}, 422),
        ("/lat/{lat}/events", {"fromBlock": "12", "toBlock": "11"}, 422),
        ("/lat/{lat}/events", {"fromBlock": "-1"}, 422),
        ("/lat/{lat}/events", {"cursor": "nonsense"}, 422),
        ("/lat/{lat}/events", {"take": "0"}, 422),
        ("/lat/{lat}/holders", {"take": "101"}, 422),
        ("/lat/{lat}/holders", {"skip": "x"}, 422),
    ],
)
def test_bad_input(api, lat, path, query, status):
    response = api.get(path.format(lat=lat.proxy_address), query)
    assert response.status_code == status, response.content
    error = response.json()["error"]
    assert error["code"] == {404: "not_found", 422: "unprocessable_entity"}[status]


def test_a_deposits_cursor_is_not_an_events_cursor(api, lat):
    deposits_cursor = "ZDE6MTA6MDozMTMzNw"  # base64url of "d1:10:0:31337"
    response = api.get(f"/lat/{lat.proxy_address}/events", {"cursor": deposits_cursor})
    assert response.status_code == 422
    assert "cursor" in response.json()["error"]["message"]


def test_wallet_never_seen_and_unknown_type_name_the_parameter(api, lat):
    wallet = A(0x7777)
    assert api.get(f"/wallets/{wallet.lower()}").json() == {
        "data": {"address": wallet, "positions": []}
    }
    message = api.get(f"/lat/{lat.proxy_address}/events", {"type": "mint"}).json()["error"]
    assert "type" in message["message"]
    message = api.get(
        f"/lat/{lat.proxy_address}/events", {"fromBlock": "5", "toBlock": "4"}
    ).json()["error"]
    assert "fromBlock" in message["message"]
