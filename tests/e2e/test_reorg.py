"""Reorgs made for real on anvil: evm_snapshot, blocks mined and indexed, evm_revert, other blocks
mined at the same heights (so the same block numbers carry other hashes), indexed again.

Every expected value is read from the canonical chain with plain web3 (`get_logs`,
`get_block`), never from the service's tables.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.core.management import call_command

from deposits.models import Deposit, DepositCheckpoint
from devchain.devnet import make_deposits, write_manifests
from lats.models import Lat, SyncStatus
from metrics.models import RewardsCheckpoint, RewardSubmission
from sync.tasks import index_deposits, record_snapshot
from tests.chainreads import chain_deposit_keys, chain_deposits, chain_submissions, hexstr
from tests.served import served_deposits
from tests.storedcounts import assert_deposit_counts_match_rows

pytestmark = [pytest.mark.django_db, pytest.mark.chain]

WAD = 10**18


DEPTH = 6


@pytest.fixture
def shallow(chain, settings, tmp_path):
    """Synced with REORG_MAX_DEPTH = 6: each checkpoint records the block 6 below it."""
    settings.REORG_MAX_DEPTH = DEPTH
    settings.REORG_MAX_DEPTH_BY_CHAIN = {}
    settings.RPC_URL = chain.url
    call_command("lat_import", *map(str, write_manifests(chain.manifests, tmp_path)))
    call_command("lat_sync", "--no-progress")
    return chain


def submit_rewards(chain, manifest: dict[str, Any], amount: int) -> str:
    """The LAT's AVS submits `amount` of the LAT's first token to its strategies (3 blocks). An
    AVS that is a ServiceManager contract (latETH's) submits through it, sent by its owner."""
    avs = manifest["avsAddress"]
    submitter = chain.contract("RewardsCoordinator", manifest["eigenlayer"]["rewardsCoordinator"])
    sender = avs
    if chain.w3.eth.get_code(avs):
        submitter = chain.contract("ServiceManager", avs)
        sender = submitter.functions.owner().call()
    token = chain.contract("TestERC20", manifest["tokens"][0]["address"])
    for call in (
        token.functions.mint(sender, amount),
        token.functions.approve(submitter.address, amount),
    ):
        chain.w3.eth.wait_for_transaction_receipt(call.transact({"from": sender}))
    strategies = sorted((t["strategy"] for t in manifest["tokens"]), key=lambda a: int(a, 16))
    now = chain.w3.eth.get_block("latest")["timestamp"]
    submission = ([(s, WAD) for s in strategies], token.address, amount, now - now % 86400, 86400)
    receipt = chain.w3.eth.wait_for_transaction_receipt(
        submitter.functions.createAVSRewardsSubmission([submission]).transact({"from": sender})
    )
    assert receipt["status"] == 1
    return hexstr(receipt["transactionHash"])


def assert_equals_the_chain(chain, api) -> None:
    expected = chain_deposit_keys(chain)
    stored = list(
        Deposit.objects.order_by("block_number", "log_index").values_list(
            "block_number", "log_index", "tx_hash", "block_hash"
        )
    )
    assert stored == expected
    assert_deposit_counts_match_rows()
    assert served_deposits(api) == chain_deposits(chain)  # the API's order, newest first
    assert api.get("/metrics/deposits").json()["meta"]["total"] == len(expected)
    assert {
        (s.tx_hash, s.log_index, s.block_number, s.block_hash, int(s.amount))
        for s in RewardSubmission.objects.all()
    } == chain_submissions(chain)
    head = chain.w3.eth.get_block("latest")  # 0 confirmations on the devnet
    head_hash = hexstr(head["hash"])
    assert sorted(
        DepositCheckpoint.objects.values_list("lat__proxy_address", "block_number", "block_hash")
    ) == sorted((m["proxyAddress"], head["number"], head_hash) for m in chain.manifests)
    assert sorted(
        RewardsCheckpoint.objects.values_list("avs__address", "block_number", "block_hash")
    ) == sorted((m["avsAddress"], head["number"], head_hash) for m in chain.manifests)


def test_reorg_leaves_exactly_the_canonical_history(synced, api):
    chain = synced
    eth, btc = chain.lat("latETH"), chain.lat("latBTC")
    make_deposits(chain.url, eth, 11, [eth["tokens"][0]["address"]], [WAD])  # stays canonical
    call_command("lat_sync", "--no-progress")
    fork = chain.rpc("evm_snapshot")
    orphans = [
        make_deposits(chain.url, eth, 12, [eth["tokens"][0]["address"]], [2 * WAD])["txHash"],
        make_deposits(chain.url, btc, 13, [btc["tokens"][1]["address"]], [3 * WAD])["txHash"],
        submit_rewards(chain, eth, 4 * WAD),
    ]
    call_command("lat_sync", "--no-progress")
    assert_equals_the_chain(chain, api)  # the orphans-to-be are indexed
    stored = set(Deposit.objects.values_list("tx_hash", flat=True)) | set(
        RewardSubmission.objects.values_list("tx_hash", flat=True)
    )
    assert set(orphans) <= stored

    # The chain reorganises: other transactions take the same block numbers, and it grows on.
    assert chain.rpc("evm_revert", fork)
    for index, amount in ((14, 5), (15, 6), (16, 7)):
        make_deposits(chain.url, eth, index, [eth["tokens"][0]["address"]], [amount * WAD])
    submit_rewards(chain, btc, 10**7)  # 0.1 WBTC
    chain.rpc("anvil_mine", hex(2))
    call_command("lat_sync", "--no-progress")

    assert_equals_the_chain(chain, api)
    stored = set(Deposit.objects.values_list("tx_hash", flat=True)) | set(
        RewardSubmission.objects.values_list("tx_hash", flat=True)
    )
    assert not set(orphans) & stored
    assert not SyncStatus.objects.exclude(last_error="").exists()


def history() -> dict[str, list[Any]]:
    return {
        "deposits": list(Deposit.objects.order_by("id").values()),
        "submissions": list(RewardSubmission.objects.order_by("id").values()),
        "deposit_checkpoints": list(DepositCheckpoint.objects.order_by("id").values()),
        "rewards_checkpoints": list(RewardsCheckpoint.objects.order_by("id").values()),
    }


def orphan_branch(chain, eth: dict[str, Any], blocks: int) -> tuple[str, int]:
    """A branch of `blocks` blocks (at least 6) above a snapshot, holding a deposit of latETH
    and a reward submission of its AVS: (the snapshot, the block below the branch)."""
    fork = chain.rpc("evm_snapshot")
    base = chain.w3.eth.block_number
    make_deposits(chain.url, eth, 12, [eth["tokens"][0]["address"]], [2 * WAD])  # 3 blocks
    submit_rewards(chain, eth, WAD)  # 3 blocks
    chain.rpc("anvil_mine", hex(blocks - 6))
    assert chain.w3.eth.block_number == base + blocks
    return fork, base


@pytest.mark.parametrize("orphaned", [DEPTH, DEPTH + 1], ids=["at-the-limit", "one-deeper"])
def test_reorg_depth_limit(shallow, api, orphaned):
    """The indexed branch holds a deposit and a reward submission in `orphaned` blocks above
    the fork; the other branch replaces them all."""
    chain = shallow
    eth = chain.lat("latETH")
    fork, base = orphan_branch(chain, eth, orphaned)
    call_command("lat_sync", "--no-progress")
    before = history()
    assert chain.rpc("evm_revert", fork)
    make_deposits(chain.url, eth, 13, [eth["tokens"][0]["address"]], [5 * WAD])
    chain.rpc("anvil_mine", hex(orphaned))  # longer than the indexed branch
    lat_ids = sorted(Lat.objects.values_list("id", flat=True))
    results = [index_deposits.apply(args=[i]).result for i in lat_ids]
    results += [record_snapshot.apply(args=[i]).result for i in lat_ids]
    if orphaned == DEPTH:
        assert [r["status"] for r in results] == ["done"] * 6
        assert_equals_the_chain(chain, api)
        assert RewardSubmission.objects.count() == len(chain_submissions(chain))  # orphan gone
        return
    assert [r["status"] for r in results] == ["failed"] * 6
    assert history() == before  # nothing deleted, nothing written
    expected = (
        f"ReorgTooDeep: the chain reorganised deeper than {DEPTH} blocks below block "
        f"{base + orphaned} (REORG_MAX_DEPTH): block {base + orphaned - DEPTH}, indexed as "
        "final, is no longer on the chain."
    )
    statuses = SyncStatus.objects.filter(job__in=["deposits", "snapshot"])
    assert statuses.count() == 6
    for status in statuses:
        assert status.last_error.startswith(expected), status.last_error
        assert status.consecutive_failures == 1
    # Indexing of the LAT stays stopped: the next run fails the same way and changes nothing.
    again = index_deposits.apply(args=[lat_ids[0]]).result
    assert again["status"] == "failed"
    assert again["error"].startswith(expected)
    assert history() == before
    assert SyncStatus.objects.get(lat_id=lat_ids[0], job="deposits").consecutive_failures == 2


def test_checkpoint_without_a_hash_is_trusted_then_completed(synced, api):
    """A rewards checkpoint written before hashes were recorded (migration metrics 0003) is
    not taken for a reorg; the next range stored records the hashes."""
    chain = synced
    RewardsCheckpoint.objects.update(block_hash="", final_block=None, final_hash="")
    eth = chain.lat("latETH")
    submit_rewards(chain, eth, WAD)
    call_command("lat_sync", "--no-progress")
    assert_equals_the_chain(chain, api)
    assert not SyncStatus.objects.exclude(last_error="").exists()


def test_an_avs_rewards_are_indexed_by_one_job_at_a_time(synced):
    """The submissions and checkpoint are the AVS's, which LATs may share: while another job
    holds the AVS's lock, a LAT's snapshot writes none of them (and still records its metrics);
    once the lock is free, the next run stores what the chain has."""
    from metrics.avs import REWARDS_LOCK
    from metrics.models import MetricSnapshot
    from metrics.services import metrics_refresh
    from tests.lockholder import Holder

    chain, manifest = synced, synced.lat("latETH")
    lat = Lat.objects.get(proxy_address=manifest["proxyAddress"])
    checkpoint = RewardsCheckpoint.objects.get(avs=lat.avs).block_number
    stored = set(RewardSubmission.objects.values_list("tx_hash", flat=True))
    tx = submit_rewards(chain, manifest, 5 * WAD)
    MetricSnapshot.objects.filter(lat=lat).delete()
    with Holder(REWARDS_LOCK, lat.avs_id) as holder:
        assert holder.acquired
        metrics_refresh(lat=lat)
        assert set(RewardSubmission.objects.values_list("tx_hash", flat=True)) == stored
        assert RewardsCheckpoint.objects.get(avs=lat.avs).block_number == checkpoint
        assert MetricSnapshot.objects.filter(lat=lat).exists()
    metrics_refresh(lat=lat)
    assert tx in set(RewardSubmission.objects.values_list("tx_hash", flat=True))
    assert {
        (s.tx_hash, s.log_index, s.block_number, s.block_hash, int(s.amount))
        for s in RewardSubmission.objects.all()
    } == chain_submissions(chain)


def test_after_a_reorg_too_deep_a_rewind_by_hand_indexes_the_canonical_chain(shallow, api):
    """ReorgTooDeep stops indexing; `lat_rewind` to a block at or below the fork (refused above
    it, a dry run without --yes) lets the next sync index the canonical chain: deposits, reward
    submissions, checkpoints and holders' balances as the chain has them."""
    from io import StringIO

    from django.core.management.base import CommandError

    from deposits.models import Holder
    from tests.chainreads import chain_balances

    chain = shallow
    eth = chain.lat("latETH")
    fork, base = orphan_branch(chain, eth, DEPTH + 1)
    call_command("lat_sync", "--no-progress")
    assert chain.rpc("evm_revert", fork)
    make_deposits(chain.url, eth, 13, [eth["tokens"][0]["address"]], [5 * WAD])
    chain.rpc("anvil_mine", hex(DEPTH + 1))
    with pytest.raises(CommandError, match="3 LAT"):
        call_command("lat_sync", "--no-progress")
    stopped = SyncStatus.objects.filter(job="deposits", last_error__startswith="ReorgTooDeep")
    assert stopped.count() == 3
    before = history()
    lat = eth["proxyAddress"]

    # Above the fork: the newest block stored at or below it is the orphaned branch's.
    with pytest.raises(CommandError, match="the fork is further down"):
        call_command("lat_rewind", "--lat", lat, "--to-block", str(base + DEPTH), "--yes")
    out = StringIO()
    call_command("lat_rewind", "--lat", lat, "--to-block", str(base), stdout=out)
    assert "would remove 1 deposits, 2 events and 1 reward submissions" in out.getvalue()
    assert history() == before

    out = StringIO()
    lats = [m["proxyAddress"] for m in chain.manifests]
    call_command(
        "lat_rewind", *(f"--lat={a}" for a in lats), "--to-block", str(base), "--yes", stdout=out
    )
    assert f"removed 1 deposits, 2 events and 1 reward submissions above block {base}" in (
        out.getvalue()
    )
    call_command("lat_sync", "--no-progress")
    assert_equals_the_chain(chain, api)
    assert not SyncStatus.objects.exclude(last_error="").exists()
    head = chain.w3.eth.block_number
    balances = chain_balances(chain, eth, head)
    stored = dict(Holder.objects.filter(lat__proxy_address=lat).values_list("address", "balance"))
    assert {a: int(b) for a, b in stored.items()} == {a.lower(): b for a, b in balances.items()}
