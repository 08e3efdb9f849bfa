"""A node that dies, hangs or answers garbage: the job fails cleanly, the database keeps its last
good state, the failure is recorded, and the next run recovers.

The dying node is a real anvil (a second one, loaded with the devnet's state) killed mid-sync.
Only the faults a real node cannot be made to produce (garbage, silence) use a fake server.
"""

from __future__ import annotations

import datetime as dt
import http.server
import json
import socketserver
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from django.core.management import call_command

from activity.indexer import deposit_index
from chain import gateway as gateway_module
from chain.errors import ChainUnavailable
from chain.history import first_block_with_state
from deposits.models import Deposit, DepositCheckpoint
from devchain.anvil import start_anvil
from devchain.devnet import connect, deposit_many, make_deposits, write_manifests
from lats.models import Lat, LatToken, SyncStatus
from metrics.models import LatDay, MetricSnapshot, RatePoint
from operators.models import NodeAsset, StakerNode
from sync.refresh import refresh_state
from tests.storedcounts import assert_deposit_counts_match_rows

pytestmark = [pytest.mark.django_db, pytest.mark.chain]

WAD = 10**18


def data_tables() -> dict[str, list[dict[str, Any]]]:
    """Everything the refresh jobs write, except their own status rows."""
    return {
        "lats": list(Lat.objects.order_by("id").values()),
        "tokens": list(LatToken.objects.order_by("id").values()),
        "nodes": list(StakerNode.objects.order_by("id").values()),
        "assets": list(NodeAsset.objects.order_by("id").values()),
        "deposits": list(Deposit.objects.order_by("id").values()),
        "checkpoints": list(
            DepositCheckpoint.objects.order_by("id").values("lat_id", "block_number", "block_hash")
        ),
    }


class SpareNode:
    """An anvil of its own, loaded with the devnet's state, that a test may kill and restart."""

    def __init__(self, dump: str) -> None:
        self.dump = dump
        self.node = start_anvil()
        self.url = self.node.url
        self._load()

    def _load(self) -> None:
        response = connect(self.url).provider.make_request("anvil_loadState", [self.dump])
        assert response.get("result") is True, response

    def kill(self) -> None:
        self.node.stop()

    def restart(self, dump: str | None = None) -> None:
        """A fresh node on the same port, loaded with `dump` (default: the original state)."""
        self.dump = dump or self.dump
        self.node = start_anvil(port=self.node.port)
        self._load()

    def save(self) -> str:
        return connect(self.url).provider.make_request("anvil_dumpState", [])["result"]


@pytest.fixture
def spare(chain) -> Iterator[SpareNode]:
    node = SpareNode(chain.rpc("anvil_dumpState"))
    try:
        yield node
    finally:
        node.kill()


@pytest.fixture
def imported(chain, spare, settings, tmp_path):
    settings.RPC_URL = spare.url
    call_command("lat_import", *map(str, write_manifests(chain.manifests, tmp_path)))
    call_command("lat_sync", "--no-progress")
    return chain


def test_node_killed_mid_refresh_leaves_the_database_as_it_was(imported, spare, monkeypatch):
    manifest = imported.lat("latETH")
    token = manifest["tokens"][0]["address"]
    make_deposits(spare.url, manifest, 12, [token], [4 * WAD])  # changes balances and supply
    after_deposit = spare.save()
    before = data_tables()
    lat = Lat.objects.get(proxy_address=manifest["proxyAddress"])

    real_read_nodes = gateway_module.Gateway.read_nodes

    def read_nodes_after_killing_the_node(self, **kwargs):
        spare.kill()  # the LAT's own state was read; the node dies before the nodes are
        return real_read_nodes(self, **kwargs)

    monkeypatch.setattr(gateway_module.Gateway, "read_nodes", read_nodes_after_killing_the_node)
    with pytest.raises(ChainUnavailable):
        refresh_state(lat=lat)
    monkeypatch.setattr(gateway_module.Gateway, "read_nodes", real_read_nodes)

    assert data_tables() == before
    status = SyncStatus.objects.get(lat=lat, job="state")
    assert "could not be reached" in status.last_error
    assert status.consecutive_failures == 1

    spare.restart(after_deposit)
    lat.refresh_from_db()
    refresh_state(lat=lat)
    lt = connect(spare.url).eth.contract(
        address=manifest["proxyAddress"], abi=imported.contract("LiquidToken", token).abi
    )
    lat.refresh_from_db()
    assert int(lat.total_supply) == lt.functions.totalSupply().call()
    status.refresh_from_db()
    assert status.last_error == ""
    assert status.consecutive_failures == 0


def test_node_killed_mid_indexing_keeps_whole_ranges_and_resumes(imported, spare, settings):
    manifest = imported.lat("latBTC")
    # 60 blocks: more ranges of 3 than the indexer reads ahead, so the node dies mid-run.
    deposit_many(spare.url, manifest, 120, per_tx=2)
    grown = spare.save()
    lat = Lat.objects.get(proxy_address=manifest["proxyAddress"])
    start = DepositCheckpoint.objects.get(lat=lat).block_number
    calls = []

    def kill_after_first_range(done: int, total: int) -> None:
        calls.append(done)
        if len(calls) == 1:
            spare.kill()

    with pytest.raises(ChainUnavailable):
        deposit_index(lat=lat, max_range=3, progress=kill_after_first_range)
    checkpoint = DepositCheckpoint.objects.get(lat=lat)
    # The ranges stored when the node died, and those read ahead already: whole ranges,
    # then the error.
    stored_blocks = checkpoint.block_number - start
    assert stored_blocks > 0
    assert stored_blocks % 3 == 0
    stored = Deposit.objects.filter(lat=lat)
    assert not stored.filter(block_number__gt=checkpoint.block_number).exists()
    assert_deposit_counts_match_rows()

    spare.restart(grown)
    summary = deposit_index(lat=lat, max_range=50)
    assert summary.new > 0
    lt = connect(spare.url).eth.contract(
        address=manifest["proxyAddress"],
        abi=imported.contract("LiquidToken", manifest["proxyAddress"]).abi,
    )
    events = lt.events.AssetDeposited.get_logs(from_block=manifest["deploymentBlock"])
    assert sorted(
        Deposit.objects.filter(lat=lat).values_list("block_number", "log_index")
    ) == sorted((e["blockNumber"], e["logIndex"]) for e in events)


class _FakeNode(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def fake_node(answer) -> tuple[_FakeNode, str]:
    """A local HTTP server whose every POST gets `answer(body) -> bytes` (or hangs)."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            payload = answer(body)
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args):
            pass

    server = _FakeNode(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def _garbage(body: bytes) -> bytes:
    return b"<html>502 Bad Gateway</html>"


def _wrong_shapes(body: bytes) -> bytes:
    request = json.loads(body)
    if isinstance(request, list):
        return json.dumps(
            [{"jsonrpc": "2.0", "id": r["id"], "result": "0x"} for r in request]
        ).encode()
    if request["method"] == "eth_chainId":  # the right chain: the garbage comes after
        return json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": "0x7a69"}).encode()
    if request["method"] == "eth_blockNumber":  # ahead of the stored state: not lagging
        return json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": "0x1000"}).encode()
    if request["method"] == "eth_getBlockByNumber":
        number = request["params"][0]
        return json.dumps(
            {
                "jsonrpc": "2.0",
                "id": request["id"],
                "result": {"number": number, "hash": "0x" + "ab" * 32, "timestamp": "0x1"},
            }
        ).encode()
    return json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": "0xdeadbeef"}).encode()


def _silent(body: bytes) -> bytes:
    time.sleep(3)
    return b"{}"


@pytest.mark.parametrize(
    "answer", [_garbage, _wrong_shapes, _silent], ids=["garbage", "wrong-shapes", "too-slow"]
)
def test_bad_node_fails_cleanly_and_the_next_run_recovers(imported, spare, settings, answer):
    settings.RPC_TIMEOUT = 0.5
    lat = Lat.objects.get(proxy_address=imported.lat("latORB")["proxyAddress"])
    make_deposits(
        spare.url,
        imported.lat("latORB"),
        12,
        [imported.lat("latORB")["tokens"][0]["address"]],
        [7 * WAD],
    )
    before = data_tables()
    server, url = fake_node(answer)
    try:
        settings.RPC_URL = url
        with pytest.raises(ChainUnavailable):
            refresh_state(lat=lat)
        with pytest.raises(ChainUnavailable):
            deposit_index(lat=lat)
    finally:
        server.shutdown()
    assert data_tables() == before
    for job in ("state", "deposits"):
        status = SyncStatus.objects.get(lat=lat, job=job)
        assert status.last_error.startswith("ChainUnavailable")
        assert url not in status.last_error  # node URLs can carry API keys

    settings.RPC_URL = spare.url
    settings.RPC_TIMEOUT = 10
    refresh_state(lat=lat)
    assert deposit_index(lat=lat).new == 1
    assert SyncStatus.objects.get(lat=lat, job="deposits").last_error == ""


def test_a_node_that_keeps_no_history_reads_what_it_keeps_and_names_the_days_it_cannot(
    imported, spare
):
    """The spare node is loaded from a state dump: it keeps the state of its head only, as a
    node that prunes history keeps only its recent blocks. The snapshot job still records the
    LAT (no failure), reads no past day or hour, and the LAT's gaps name the days it could not
    read: every whole UTC day from the LAT's first to the last that ended."""
    w3 = connect(spare.url)
    head = w3.eth.get_block("latest")
    manifest = imported.lat("latETH")
    deployed = w3.eth.get_block(manifest["deploymentBlock"])  # block headers are kept
    first = dt.datetime.fromtimestamp(deployed["timestamp"], dt.UTC).date() + dt.timedelta(days=1)
    last = dt.datetime.fromtimestamp(head["timestamp"], dt.UTC).date() - dt.timedelta(days=1)
    lat = Lat.objects.get(proxy_address=manifest["proxyAddress"])

    status = SyncStatus.objects.get(lat=lat, job="snapshot")
    assert status.last_error == ""
    assert status.consecutive_failures == 0
    assert MetricSnapshot.objects.filter(lat=lat).exists()
    assert not LatDay.objects.filter(lat=lat).exists()
    assert not RatePoint.objects.filter(lat=lat).exists()
    days = (last - first).days + 1
    assert days >= 5  # the devnet's days of history
    assert any(
        gap.startswith(f"{days} day(s) from {first} to {last} could not be read")
        for gap in lat.apy_gaps
    ), lat.apy_gaps

    gateway = gateway_module.gateway_for_url(spare.url, timeout=10)
    assert (
        first_block_with_state(gateway, manifest["proxyAddress"], low=0, high=head["number"])
        == head["number"]
    )


def test_sync_command_reports_failure_per_lat(imported, settings, capsys):
    settings.RPC_URL = "http://127.0.0.1:9"  # nothing listens on the discard port
    with pytest.raises(Exception, match="3 LAT"):
        call_command("lat_sync", "--no-progress")
    assert "sync failed" in capsys.readouterr().err


def range_limited_node(upstream: str, max_blocks: int) -> tuple[_FakeNode, str, list[int]]:
    """A node in front of anvil that refuses eth_getLogs over more than `max_blocks` blocks,
    as hosted nodes do (anvil itself has no such limit). Returns the refused range sizes."""
    import requests

    refused: list[int] = []
    session = requests.Session()

    def answer(body: bytes) -> bytes:
        request = json.loads(body)
        if isinstance(request, dict) and request["method"] == "eth_getLogs":
            query = request["params"][0]
            span = int(query["toBlock"], 16) - int(query["fromBlock"], 16) + 1
            if span > max_blocks:
                refused.append(span)
                return json.dumps(
                    {
                        "jsonrpc": "2.0",
                        "id": request["id"],
                        "error": {"code": -32005, "message": f"query exceeds {max_blocks} blocks"},
                    }
                ).encode()
        return session.post(
            upstream, data=body, headers={"Content-Type": "application/json"}, timeout=30
        ).content

    server, url = fake_node(answer)
    return server, url, refused


def test_ranges_shrink_while_the_node_refuses_them(imported, spare, settings):
    manifest = imported.lat("latBTC")
    deposit_many(spare.url, manifest, 60, per_tx=5)  # 12 deposit transactions, many blocks
    lat = Lat.objects.get(proxy_address=manifest["proxyAddress"])
    server, url, refused = range_limited_node(spare.url, max_blocks=4)
    try:
        settings.RPC_URL = url
        summary = deposit_index(lat=lat, max_range=64)
    finally:
        server.shutdown()
    assert summary.new == 60
    assert refused  # it did ask for more first
    assert min(refused) > 4
    assert Deposit.objects.filter(lat=lat).count() == 65  # 5 from the devnet + 60
    assert_deposit_counts_match_rows()


def test_confirmation_depth_holds_back_the_newest_blocks(imported, spare, settings):
    manifest = imported.lat("latETH")
    lat = Lat.objects.get(proxy_address=manifest["proxyAddress"])
    settings.CHAIN_CONFIRMATIONS_BY_CHAIN = {31337: 3}
    result = make_deposits(spare.url, manifest, 12, [manifest["tokens"][0]["address"]], [WAD])
    assert deposit_index(lat=lat).new == 0  # the deposit is the head block: 0 confirmations
    assert not Deposit.objects.filter(block_number=result["blockNumber"]).exists()
    connect(spare.url).provider.make_request("anvil_mine", [hex(3)])
    assert deposit_index(lat=lat).new == 1
    assert Deposit.objects.filter(block_number=result["blockNumber"]).count() == 1
