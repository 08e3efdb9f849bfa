"""The live stream of the devnet's real events, on anvil, through the Procfile's stream
process: what a client receives is compared with the LAT's feed as the API serves it and with
the logs plain web3 decodes (`get_logs`)."""

from __future__ import annotations

import threading
import time

import pytest
from django.core.management import call_command
from django.db import connection as db_connection
from rest_framework.test import APIClient

from deposits.models import Event
from devchain.devnet import make_deposits
from tests.served import served_events
from tests.webhooks.test_chain import expected, filtered_activity, names, send
from webhooks.models import OutboxEvent

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.chain]
DEVNET = pytest.mark.parametrize("devnet_kind", ["multicall3"], indirect=True)
WAD = 10**18


def sync() -> None:
    call_command("lat_sync", "--no-progress")


def chain_data(message) -> dict:
    """The message's data without what the stream adds to a feed event (lat, chainId)."""
    return {k: v for k, v in message.data["data"].items() if k not in ("lat", "chainId")}


@DEVNET
def test_a_deposit_a_transfer_and_a_pause_arrive_in_chain_order_as_the_feed_has_them(
    synced, connect
):
    chain = synced
    manifest = chain.manifests[0]
    lat = manifest["proxyAddress"]
    stream = connect(f"lats={lat}")
    time.sleep(0.3)  # subscribed
    before = chain.w3.eth.block_number
    make_deposits(chain.url, manifest, 1, [manifest["tokens"][0]["address"]], [WAD])
    lt = chain.contract("LiquidToken", lat)
    send(chain, lt.functions.transfer(chain.account(7), WAD // 2), chain.account(1))
    send(chain, lt.functions.pause(), chain.account(0))
    sync()

    feed = [
        e for e in reversed(served_events(APIClient(), lat, take=50)) if e["blockNumber"] > before
    ]
    assert {"deposit", "transfer", "paused"} <= {e["type"] for e in feed}
    got = stream.wait(len(feed) + 1)  # and the statusChanged of the pause
    events = [m for m in got if m.event != "statusChanged"]
    assert [chain_data(m) for m in events] == feed  # chain order, equal to the feed
    assert [m.event for m in events] == [e["type"] for e in feed]
    assert [int(m.id) for m in got] == sorted(int(m.id) for m in got)
    want = expected(chain, [manifest], before)  # from get_logs
    assert {m.data["id"]: m.data["data"] for m in events} == want
    (status,) = [m for m in got if m.event == "statusChanged"]
    assert status.data["data"]["paused"] is True
    assert status.data["data"]["lat"] == lat


@DEVNET
def test_filters_deliver_exactly_the_matching_events(synced, connect):
    chain = synced
    second = chain.manifests[1]
    wallet = chain.account(5)
    by_type = connect("types=transfer,deposit")
    by_lat = connect(f"lats={second['proxyAddress'].lower()}")
    by_wallet = connect(f"wallets={wallet}")
    time.sleep(0.3)
    before = filtered_activity(chain, wallet)

    want = expected(chain, chain.manifests, before)
    cases = (
        (by_type, {i: e for i, e in want.items() if e["type"] in ("transfer", "deposit")}),
        (by_lat, {i: e for i, e in want.items() if e["lat"] == second["proxyAddress"]}),
        (by_wallet, {i: e for i, e in want.items() if names(e, wallet)}),
    )
    assert len(cases[2][1]) == 3  # the deposit to the wallet, both transfers
    for stream, wanted in cases:
        got = stream.wait(len(wanted))
        assert {m.data["id"]: m.data["data"] for m in got} == wanted
    time.sleep(1.5)  # and nothing else
    assert [len(stream.messages) for stream, _ in cases] == [len(w) for _, w in cases]


@DEVNET
def test_the_history_of_a_lat_just_imported_is_not_pushed(synced):
    """The first sync stored the devnet's history (in the feed) and pushed none of it; what
    happens after is pushed, each event once."""
    chain = synced
    assert Event.objects.exists()
    assert not OutboxEvent.objects.exists()
    manifest = chain.manifests[0]
    before = chain.w3.eth.block_number
    make_deposits(chain.url, manifest, 1, [manifest["tokens"][0]["address"]], [WAD])
    sync()
    want = expected(chain, chain.manifests, before)
    pushed = OutboxEvent.objects.exclude(type=OutboxEvent.Type.STATUS_CHANGED)
    assert sorted(pushed.values_list("event_id", flat=True)) == sorted(want)


@DEVNET
def test_an_event_orphaned_by_a_reorg_is_withdrawn_on_the_stream(synced, connect):
    chain = synced
    manifest = chain.manifests[0]
    stream = connect(f"lats={manifest['proxyAddress']}&types=transfer,eventRemoved")
    time.sleep(0.3)
    lt = chain.contract("LiquidToken", manifest["proxyAddress"])
    fork = chain.rpc("evm_snapshot")
    orphan = send(chain, lt.functions.transfer(chain.account(9), WAD), chain.account(1))
    sync()
    (sent,) = stream.wait(1)
    assert sent.data["data"]["transactionHash"] == orphan["transactionHash"].to_0x_hex()
    assert chain.rpc("evm_revert", fork)
    kept = send(chain, lt.functions.transfer(chain.account(10), WAD // 3), chain.account(2))
    chain.rpc("anvil_mine", hex(3))
    sync()
    got = stream.wait(3)
    assert [m.event for m in got] == ["transfer", "eventRemoved", "transfer"]
    assert got[1].data["data"]["removedId"] == sent.data["id"]
    assert got[2].data["data"]["transactionHash"] == kept["transactionHash"].to_0x_hex()
    assert [int(m.id) for m in got] == sorted(int(m.id) for m in got)


@DEVNET
def test_a_client_resuming_with_last_event_id_while_deposits_go_on_misses_and_repeats_nothing(
    synced, connect
):
    chain, manifest = synced, synced.manifests[0]
    token, query = (
        manifest["tokens"][0]["address"],
        f"lats={manifest['proxyAddress']}&types=deposit",
    )
    before = chain.w3.eth.block_number
    first = connect(query)
    time.sleep(0.3)
    failures: list[BaseException] = []

    def deposits() -> None:  # each deposit indexed (and pushed) at once, as the follower does
        try:
            for sender in range(1, 7):
                make_deposits(chain.url, manifest, sender, [token], [WAD])
                sync()
        except BaseException as exc:  # reported by the test
            failures.append(exc)
        finally:
            db_connection.close()  # this thread's

    making = threading.Thread(target=deposits)
    making.start()
    try:
        first.wait(2, timeout=60)
        first.close()  # away while the deposits go on
        seen = list(first.messages)
        time.sleep(1)
        second = connect(query, Last_Event_ID=seen[-1].id)
    finally:
        making.join()
    assert not failures, failures
    deposited = [e for e in expected(chain, [manifest], before).values() if e["type"] == "deposit"]
    assert len(deposited) == 6
    rest = second.wait(6 - len(seen), timeout=30)
    got = [m.data["data"] for m in (*seen, *rest)]
    assert got == sorted(deposited, key=lambda e: (e["blockNumber"], e["logIndex"]))
    time.sleep(1)
    assert len(second.messages) == len(rest)  # no repeat
