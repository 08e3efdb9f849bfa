"""Node faults anvil cannot produce, made by tests/rpc_proxy.py in front of it: a node on another
chain, a lagging node, a provider's eth_getLogs range limit, logs from another branch than
their headers; and a database error in a job, made for real by a token the chain really has.

Expected rows are read from the chain with plain web3; expected error texts are written out.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.core.management import call_command
from django.db.utils import DataError

from activity.indexer import deposit_index
from activity.indexing import READ_ATTEMPTS
from chain.errors import ChainUnavailable
from deposits.models import Deposit, DepositCheckpoint
from devchain.devnet import load_artifacts, make_deposits, write_manifests
from lats.models import Avs, Lat, LatToken, SyncStatus, Token
from metrics.models import MetricSnapshot, RewardsCheckpoint, RewardSubmission
from operators.models import NodeAsset, StakerNode
from sync.tasks import index_deposits, record_snapshot, refresh_avs_metadata, refresh_lat_state
from tests.chainreads import chain_deposit_keys, chain_submissions, hexstr
from tests.rpc_proxy import RpcProxy

pytestmark = [pytest.mark.django_db, pytest.mark.chain]

WAD = 10**18
TASKS = [
    (refresh_lat_state, "state"),
    (refresh_avs_metadata, "metadata"),
    (index_deposits, "deposits"),
    (record_snapshot, "snapshot"),
]


@pytest.fixture
def proxy(chain) -> Iterator[RpcProxy]:
    node = RpcProxy(chain.url)
    try:
        yield node
    finally:
        node.close()


def stored() -> dict[str, list[dict[str, Any]]]:
    """Everything the refresh jobs write, except their status rows."""
    models = {
        "lats": Lat,
        "avs": Avs,
        "tokens": Token,
        "lat_tokens": LatToken,
        "nodes": StakerNode,
        "assets": NodeAsset,
        "deposits": Deposit,
        "deposit_checkpoints": DepositCheckpoint,
        "submissions": RewardSubmission,
        "rewards_checkpoints": RewardsCheckpoint,
        "snapshots": MetricSnapshot,
    }
    return {name: list(model.objects.order_by("pk").values()) for name, model in models.items()}


def deposit_something(chain) -> dict[str, Any]:
    eth = chain.lat("latETH")
    return make_deposits(chain.url, eth, 12, [eth["tokens"][0]["address"]], [WAD])


# --- another chain ----------------------------------------------------------------------------


def test_node_on_another_chain_fails_every_job_and_writes_nothing(synced, proxy, settings):
    deposit_something(synced)  # something new the jobs would otherwise store
    before = stored()
    proxy.chain_id = 1
    settings.RPC_URL = proxy.url
    lat = Lat.objects.get(symbol="latETH")
    error = (
        "ChainMismatch: the node is on chain 1, not on chain 31337 of this LAT; "
        "nothing was read or written (check RPC_URL_<chainId>)"
    )
    for task, job in TASKS:
        result = task.apply(args=[lat.id])
        assert result.result["status"] == "failed", (job, result.result)
        assert result.result["error"] == error
        status = SyncStatus.objects.get(lat=lat, job=job)
        assert (status.last_error, status.consecutive_failures) == (error, 1)
    assert stored() == before
    assert proxy.log_queries == []  # not even read

    proxy.chain_id = None
    assert index_deposits.apply(args=[lat.id]).result["new"] == 1


# --- a lagging node ---------------------------------------------------------------------------


def test_node_behind_the_stored_state_skips_every_job(synced, proxy, settings):
    lat = Lat.objects.select_related("avs").get(symbol="latETH")
    checkpoint = DepositCheckpoint.objects.get(lat=lat).block_number
    rewards = RewardsCheckpoint.objects.get(avs=lat.avs).block_number
    before = stored()
    successes = dict(SyncStatus.objects.filter(lat=lat).values_list("job", "last_success_at"))
    head = min(m["deploymentBlock"] for m in synced.manifests) - 1
    proxy.head = head
    settings.RPC_URL = proxy.url
    behind = f"NodeLagging: the node is lagging: its head is block {head}, below"
    expected = {
        "state": f"{behind} the block of the stored state {lat.state_block}",
        "metadata": f"{behind} the block of the stored metadata {lat.avs.metadata_updated_block}",
        "deposits": f"{behind} the checkpoint {checkpoint}",
        "snapshot": f"{behind} the checkpoint {rewards}",
    }
    for task, job in TASKS:
        result = task.apply(args=[lat.id]).result
        text = f"{expected[job]}; this run was skipped"
        assert result == {"job": task.name, "lat": lat.id, "status": "lagging", "error": text}
        status = SyncStatus.objects.get(lat=lat, job=job)
        assert status.last_error == text
        assert status.last_success_at == successes[job]  # not a success either
    assert stored() == before


def test_node_without_the_checkpoint_block_skips_without_a_reorg(synced, proxy, settings):
    deposit_something(synced)  # the chain moves on: the node's head is above the checkpoint
    lat = Lat.objects.select_related("avs").get(symbol="latETH")
    checkpoint = DepositCheckpoint.objects.get(lat=lat)
    assert RewardsCheckpoint.objects.get(avs=lat.avs).block_number == checkpoint.block_number
    before = stored()
    proxy.missing_blocks = {checkpoint.block_number}
    settings.RPC_URL = proxy.url
    text = (
        f"NodeLagging: the node is lagging: it has no block {checkpoint.block_number}, "
        "the checkpoint; this run was skipped"
    )
    for task, job in TASKS[2:]:
        assert task.apply(args=[lat.id]).result["status"] == "lagging"
        assert SyncStatus.objects.get(lat=lat, job=job).last_error == text
    assert stored() == before  # nothing removed as if orphaned, nothing added

    proxy.missing_blocks = set()
    assert index_deposits.apply(args=[lat.id]).result["new"] == 1
    assert SyncStatus.objects.get(lat=lat, job="deposits").last_error == ""


# --- a provider's range limit -----------------------------------------------------------------


def test_every_log_scan_keeps_within_the_node_range_limit(chain, proxy, settings, tmp_path):
    settings.LOG_BLOCK_RANGE = 64
    proxy.max_log_range = 4
    settings.RPC_URL = proxy.url
    call_command("lat_import", *map(str, write_manifests(chain.manifests, tmp_path)))
    call_command("lat_sync", "--no-progress")

    eth = chain.manifests[0]
    scanned = {
        "node creations": eth["contractDeployments"]["proxy"]["stakerNodeCoordinator"]["address"],
        "AVS metadata": eth["eigenlayer"]["avsDirectory"],
        "rewards": eth["eigenlayer"]["rewardsCoordinator"],
        "deposits": eth["proxyAddress"],
    }
    for scan, address in scanned.items():
        assert proxy.refused_for(address), scan  # it asked for more at first
        assert max(proxy.log_spans(address)) <= 4, scan
    assert not SyncStatus.objects.exclude(last_error="").exists()
    # Every scan completed: the rows are the chain's.
    assert sorted(
        Deposit.objects.values_list("block_number", "log_index", "tx_hash", "block_hash")
    ) == chain_deposit_keys(chain)
    assert {
        (s.tx_hash, s.log_index, s.block_number, s.block_hash, int(s.amount))
        for s in RewardSubmission.objects.all()
    } == chain_submissions(chain)
    for manifest in chain.manifests:
        coordinator = chain.contract(
            "StakerNodeCoordinator",
            manifest["contractDeployments"]["proxy"]["stakerNodeCoordinator"]["address"],
        )
        created = {
            log["args"]["node"]: log["blockNumber"]
            for log in coordinator.events.NodeCreated.get_logs(from_block=0)
        }
        assert (
            dict(
                StakerNode.objects.filter(lat__proxy_address=manifest["proxyAddress"]).values_list(
                    "address", "created_at_block"
                )
            )
            == created
        )
        directory = chain.contract("AVSDirectory", manifest["eigenlayer"]["avsDirectory"])
        announced = directory.events.AVSMetadataURIUpdated.get_logs(
            from_block=0, argument_filters={"avs": manifest["avsAddress"]}
        )
        avs = Avs.objects.get(address=manifest["avsAddress"])
        assert (avs.metadata_uri, avs.metadata_updated_block) == (
            announced[-1]["args"]["metadataURI"],
            announced[-1]["blockNumber"],
        )


# --- logs from another branch than their headers ----------------------------------------------


def test_logs_disagreeing_with_their_block_are_read_again(synced, proxy, settings):
    result = deposit_something(synced)
    lat = Lat.objects.get(symbol="latETH")
    proxy.tamper_log_hashes = 1  # the first answer holding logs names another block hash
    settings.RPC_URL = proxy.url
    start = DepositCheckpoint.objects.get(lat=lat).block_number + 1
    head = synced.w3.eth.block_number

    assert deposit_index(lat=lat).new == 1

    key = lat.proxy_address.lower()
    assert [q for q in proxy.log_queries if q[0] == key] == [(key, start, head)] * 2
    row = Deposit.objects.get(tx_hash=result["txHash"])
    assert row.block_hash == hexstr(synced.w3.eth.get_block(result["blockNumber"])["hash"])
    assert sorted(
        Deposit.objects.values_list("block_number", "log_index", "tx_hash", "block_hash")
    ) == chain_deposit_keys(synced)
    checkpoint = DepositCheckpoint.objects.get(lat=lat)
    assert (checkpoint.block_number, checkpoint.block_hash) == (
        head,
        hexstr(synced.w3.eth.get_block(head)["hash"]),
    )


def test_logs_that_never_agree_fail_the_run_for_a_retry(synced, proxy, settings):
    deposit_something(synced)
    lat = Lat.objects.get(symbol="latETH")
    before = stored()
    proxy.tamper_log_hashes = 99
    settings.RPC_URL = proxy.url
    start = DepositCheckpoint.objects.get(lat=lat).block_number + 1
    head = synced.w3.eth.block_number

    with pytest.raises(ChainUnavailable):
        deposit_index(lat=lat)

    assert stored() == before
    key = lat.proxy_address.lower()
    assert [q for q in proxy.log_queries if q[0] == key] == [(key, start, head)] * READ_ATTEMPTS
    status = SyncStatus.objects.get(lat=lat, job="deposits")
    assert status.last_error.startswith(
        f"ChainUnavailable: the node answered blocks {start}-{head} inconsistently "
        f"{READ_ATTEMPTS} times"
    )
    assert status.consecutive_failures == 1


# --- any exception ----------------------------------------------------------------------------


def add_token_with_a_long_symbol(chain, manifest: dict[str, Any]) -> None:
    """A real ERC-20 whose symbol() is 100 characters (the column holds 64), added to the LAT."""
    w3, owner = chain.w3, chain.account(0)

    def deploy(name: str, *args: Any) -> str:
        artifact = load_artifacts()[name]
        factory = w3.eth.contract(abi=artifact["abi"], bytecode=artifact["bytecode"])
        receipt = w3.eth.wait_for_transaction_receipt(
            factory.constructor(*args).transact({"from": owner})
        )
        return receipt["contractAddress"]

    token = deploy("TestERC20", "Long", "L" * 100, 18)
    strategy = deploy("Strategy", token, manifest["eigenlayer"]["strategyManager"], WAD)
    manager = chain.contract(
        "LiquidTokenManager",
        manifest["contractDeployments"]["proxy"]["liquidTokenManager"]["address"],
    )
    # A token without a price source (native): priced 1e18, as WAD was before.
    zero = "0x" + "00" * 20
    add = manager.functions.addToken(token, 18, 0, strategy, 0, zero, 0, zero, bytes(4))
    tx = add.transact({"from": owner})
    assert w3.eth.wait_for_transaction_receipt(tx)["status"] == 1


def test_database_error_in_a_job_is_recorded_and_raised(synced):
    add_token_with_a_long_symbol(synced, synced.lat("latETH"))
    lat = Lat.objects.get(symbol="latETH")
    before = stored()

    result = refresh_lat_state.apply(args=[lat.id])

    assert result.state == "FAILURE"
    assert isinstance(result.result, DataError)  # unexpected: propagated, not retried
    status = SyncStatus.objects.get(lat=lat, job="state")
    assert status.last_error.startswith("DataError: value too long for type character varying(64)")
    assert status.consecutive_failures == 1  # recorded once, by the service
    assert stored() == before  # the refresh's transaction rolled back
