"""GET /lat/{address}/rates on anvil: every point is the LAT's totalAssets and totalSupply as web3
reads them at the last block of its hour (or day), from the LAT's first block on; paging by
cursor; the parameters' errors."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.core.management import call_command

from devchain.devnet import make_deposits
from metrics import selectors
from metrics.models import RatePoint

pytestmark = [pytest.mark.django_db, pytest.mark.chain]
DEVNET = pytest.mark.parametrize("devnet_kind", ["multicall3"], indirect=True)
WAD = 10**18
HOUR = 3600


def iso(timestamp: int) -> str:
    return datetime.fromtimestamp(timestamp, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def by_hand(assets: int, supply: int) -> str:
    """totalAssets / totalSupply to 18 decimals, truncated, as written by hand."""
    scaled = assets * WAD // supply
    text = f"{scaled // WAD}.{scaled % WAD:018d}".rstrip("0")
    return text.removesuffix(".")


def later(chain, *, hours: int, deposit: bool = True) -> None:
    """Time passes (half way, a deposit and a new price of cbETH: the rate moves), then a
    sync."""
    manifest = chain.lat("latETH")
    chain.rpc("evm_increaseTime", hours * HOUR // 2)
    if deposit:
        make_deposits(chain.url, manifest, 2, [manifest["tokens"][0]["address"]], [3 * WAD])
        manager = manifest["contractDeployments"]["proxy"]["liquidTokenManager"]["address"]
        ltm = chain.contract("LiquidTokenManager", manager)
        cbeth = manifest["tokens"][1]["address"]
        tx = ltm.functions.updatePrice(cbeth, 11 * WAD // 10).transact({"from": chain.account(0)})
        assert chain.w3.eth.wait_for_transaction_receipt(tx)["status"] == 1
    chain.rpc("evm_increaseTime", hours * HOUR // 2)
    chain.rpc("evm_mine")
    call_command("lat_sync", "--no-progress")


@DEVNET
def test_each_hour_is_the_state_at_its_last_block(synced, api):
    chain = synced
    later(chain, hours=30)
    manifest = chain.lat("latETH")
    proxy = manifest["proxyAddress"]
    lt = chain.contract("LiquidToken", proxy)
    first = chain.w3.eth.get_block(manifest["deploymentBlock"])["timestamp"]
    head = chain.w3.eth.get_block("latest")
    # `to`: the chain's time, which this test moved a day ahead of the clock.
    window = {"from": iso(first - HOUR), "to": iso(head["timestamp"])}
    body = api.get(f"/lat/{proxy}/rates", {"interval": "hour", **window}).json()
    points = body["data"]
    # Every hour from the LAT's first one to the last that ended, once, in order.
    hours = list(range(first - first % HOUR, head["timestamp"] - head["timestamp"] % HOUR, HOUR))
    assert [p["timestamp"] for p in points] == [iso(h) for h in hours]
    assert body["meta"]["next"] is None
    rates = set()
    for point, hour in zip(points, hours, strict=True):
        number = point["blockNumber"]
        block = chain.w3.eth.get_block(number)
        after = chain.w3.eth.get_block(number + 1)
        assert block["timestamp"] < hour + HOUR <= after["timestamp"]  # its hour's last block
        assets = lt.functions.totalAssets().call(block_identifier=number)
        supply = lt.functions.totalSupply().call(block_identifier=number)
        assert (point["totalAssets"], point["totalSupply"]) == (str(assets), str(supply))
        assert point["rate"] == by_hand(assets, supply)
        rates.add(point["rate"])
    assert len(rates) >= 2  # the deposit moved it

    window["from"] = iso(first - 86400)
    days = api.get(f"/lat/{proxy}/rates", window).json()["data"]
    day_ends = [p for p in points if p["timestamp"].endswith("T23:00:00Z")]
    assert [(d["blockNumber"], d["rate"]) for d in days] == [
        (p["blockNumber"], p["rate"]) for p in day_ends
    ]
    assert all(d["timestamp"].endswith("T00:00:00Z") for d in days)


@DEVNET
def test_pages_follow_each_other(synced, api, monkeypatch):
    chain = synced
    later(chain, hours=10, deposit=False)
    proxy = chain.lat("latETH")["proxyAddress"]
    first = chain.w3.eth.get_block(chain.lat("latETH")["deploymentBlock"])["timestamp"]
    end = chain.w3.eth.get_block("latest")["timestamp"]
    query = {"interval": "hour", "from": iso(first - HOUR), "to": iso(end)}
    everything = api.get(f"/lat/{proxy}/rates", query).json()["data"]
    monkeypatch.setattr(selectors, "RATES_PAGE", 3)
    pages, cursor = [], None
    while True:
        body = api.get(f"/lat/{proxy}/rates", {**query, **({"cursor": cursor} if cursor else {})})
        pages.append(body.json()["data"])
        cursor = body.json()["meta"]["next"]
        if cursor is None:
            break
    assert [len(p) for p in pages[:-1]] == [3] * (len(pages) - 1)
    assert [p for page in pages for p in page] == everything
    assert len(everything) >= 9


@DEVNET
def test_a_second_sync_reads_no_hour_twice(synced):
    later(synced, hours=5, deposit=False)
    count = RatePoint.objects.count()
    call_command("lat_sync", "--no-progress")
    assert RatePoint.objects.count() == count


def test_bad_parameters(api, dataset):
    proxy = dataset.eth_lat.proxy_address
    for query in (
        {"interval": "week"},
        {"from": "2026-05-02", "to": "2026-05-01"},
        {"from": "yesterday"},
        {"cursor": "not-a-cursor"},
    ):
        response = api.get(f"/lat/{proxy}/rates", query)
        assert response.status_code == 422, query
        assert response.json()["error"]["code"] == "unprocessable_entity"
    assert api.get("/lat/0x" + "12" * 20 + "/rates").status_code == 404
    assert api.get(f"/lat/{proxy}/rates").json() == {"data": [], "meta": {"next": None}}
