"""The AVS rewards APY (decisions.md): rewards submitted to the LAT's strategies, valued in ETH,
over the ETH value of its stake, annualised. Expected values worked out by hand."""

from __future__ import annotations

import datetime as dt

import pytest
from django.core.management import call_command

from lats.models import Lat
from metrics.models import RewardsCheckpoint, RewardSubmission
from metrics.services import snapshot_record
from tests import factories as f

pytestmark = pytest.mark.django_db

A = f.address
NOW = dt.datetime(2026, 6, 1, 12, tzinfo=dt.UTC)
DAY = 86400
WAD = 10**18


def submit(dataset, *, token, amount, start_days_ago, days, strategies, n=[0]):  # noqa: B006
    n[0] += 1
    RewardSubmission.objects.create(
        avs=dataset.avs,
        chain_id=31337,
        tx_hash=f"0x{n[0]:064x}",
        log_index=0,
        block_number=1,
        token=token,
        amount=amount,
        start_timestamp=int(NOW.timestamp()) - start_days_ago * DAY,
        duration=days * DAY,
        strategies=strategies,
    )


def test_rewards_apy_by_hand(dataset):
    # The eLAT nodes stake 8 stETH (1 ETH each) and 2000 USDx (0.0005 ETH each): 9 ETH.
    # 0.09 stETH paid over 365 days from 100 days ago to the stETH strategy: 0.09 ETH a year.
    submit(
        dataset,
        token=A(0x5E),
        amount=9 * 10**16,
        start_days_ago=100,
        days=365,
        strategies=[A(0x5001)],
    )
    # Not counted: another strategy; a token with no price; one that starts tomorrow.
    submit(
        dataset, token=A(0x5E), amount=10**20, start_days_ago=10, days=30, strategies=[A(0x5999)]
    )
    submit(
        dataset, token=A(0xABC), amount=10**20, start_days_ago=10, days=30, strategies=[A(0x5001)]
    )
    submit(
        dataset, token=A(0x5E), amount=10**20, start_days_ago=-1, days=30, strategies=[A(0x5001)]
    )
    dataset.steth.base_apy = 3
    dataset.steth.save()
    snapshot_record(lat=dataset.eth_lat, at=NOW)
    apys = Lat.objects.get(pk=dataset.eth_lat.pk).apys
    # Any window inside the payout: 0.09 / 9 = 1 %.
    assert apys["current"]["apy"] == "1"
    assert apys["trailing30d"]["apy"] == "1"
    # A year back: 100 of its 365 days were paid: 1 % x 100 / 365 = 0.27397 %.
    assert apys["trailing1y"]["apy"] == "0.274"
    # baseApy: stETH's 3 % weighted by its 20 ETH of the 21.5 ETH TVL = 2.7907 %.
    assert apys["current"]["baseApy"] == "2.7907"
    assert apys["current"]["totalApy"] == "3.7907"
    assert apys["avg30d"]["apy"] == "1"  # one daily value so far


def test_no_stake_no_rewards_apy(dataset):
    submit(dataset, token=A(0x7A), amount=WAD, start_days_ago=1, days=10, strategies=[A(0x5003)])
    snapshot_record(lat=dataset.native_lat, at=NOW)  # the native LAT stakes nothing
    assert Lat.objects.get(pk=dataset.native_lat.pk).apys["current"]["apy"] == "0"


def _amount(args) -> int:
    submission = args["rewardsSubmission"]  # (strategiesAndMultipliers, token, amount, …)
    return submission["amount"] if hasattr(submission, "keys") else submission[2]


@pytest.mark.chain
def test_submissions_indexed_from_the_chain(chain, settings, tmp_path, api):
    from devchain.devnet import write_manifests

    settings.RPC_URL = chain.url
    call_command("lat_import", *map(str, write_manifests(chain.manifests, tmp_path)))
    call_command("lat_sync", "--no-progress")
    submitted = 0
    for manifest in chain.manifests:
        rc = chain.contract("RewardsCoordinator", manifest["eigenlayer"]["rewardsCoordinator"])
        events = rc.events.AVSRewardsSubmissionCreated.get_logs(
            from_block=manifest["deploymentBlock"],
            argument_filters={"avs": manifest["avsAddress"]},
        )
        stored = RewardSubmission.objects.filter(avs__address=manifest["avsAddress"])
        assert sorted((s.tx_hash, s.block_hash, int(s.amount)) for s in stored) == sorted(
            (
                "0x" + e["transactionHash"].hex().removeprefix("0x"),
                "0x" + e["blockHash"].hex().removeprefix("0x"),
                _amount(e["args"]),
            )
            for e in events
        )
        submitted += len(events)
        head = chain.w3.eth.get_block("latest")  # 0 confirmations on the devnet
        checkpoint = RewardsCheckpoint.objects.get(avs__address=manifest["avsAddress"])
        assert (checkpoint.block_number, checkpoint.block_hash) == (
            head["number"],
            "0x" + head["hash"].hex().removeprefix("0x"),
        )
    eth = chain.lat("latETH")
    apys = api.get(f"/lat/{eth['proxyAddress']}?withRewards=true").json()["apys"]
    assert float(apys["current"]["apy"]) > 0  # the devnet's AVS rewards its stETH strategy
    call_command("lat_sync", "--no-progress")
    assert RewardSubmission.objects.count() == submitted  # nothing twice
