"""EigenLayer's core contracts where no manifest names them (chain.md, "Deployments as they are
published"): the DelegationManager and StrategyManager read from the LiquidTokenManager, the
AllocationManager's AVSMetadataURIUpdated beside the AVSDirectory's, and what the service says
where a chain has no preset and nothing names a contract."""

from __future__ import annotations

import base64
import copy
import datetime as dt
import json

import pytest
from django.core.management import call_command
from drf_spectacular.generators import SchemaGenerator
from web3 import Web3

from deposits.models import Holder
from devchain.devnet import contract, load_artifacts, write_manifests
from lats.avs_metadata import avs_refresh_metadata
from lats.models import Lat, PriceFeed, Token
from lats.state import CoreContractUnknown
from lats.sync_status import lat_gaps
from metrics.services import snapshot_record
from operators.models import NodeAsset, OperatorAvsSplit, StakerNode
from sync.refresh import refresh_state
from tests import factories as f

pytestmark = [pytest.mark.django_db]


def without_eigenlayer(chain, symbol: str, keep: tuple[str, ...] = ()) -> dict:
    manifest = copy.deepcopy(chain.lat(symbol))
    core = manifest.pop("eigenlayer")
    if keep:
        manifest["eigenlayer"] = {name: core[name] for name in keep}
    return manifest


def import_manifests(chain, settings, tmp_path, *manifests) -> None:
    settings.RPC_URL = chain.url
    call_command("lat_import", *map(str, write_manifests(list(manifests), tmp_path)))


@pytest.mark.chain
def test_nodes_are_read_through_the_delegation_manager_the_manager_names(chain, settings, tmp_path):
    manifest = without_eigenlayer(chain, "latETH")
    import_manifests(chain, settings, tmp_path, manifest)
    lat = Lat.objects.get()
    assert lat.core_contract("delegationManager") == ""  # chain 31337: no preset

    refresh_state(lat=lat)

    lat.refresh_from_db()
    named = chain.lat("latETH")["eigenlayer"]  # what the devnet deployed
    assert lat.eigenlayer_from_chain == {
        "delegationManager": named["delegationManager"],
        "strategyManager": named["strategyManager"],
    }
    assert lat.core_contract("delegationManager") == named["delegationManager"]
    # The nodes and their shares, against the contracts read with plain web3.
    coordinator = chain.contract(
        "StakerNodeCoordinator",
        manifest["contractDeployments"]["proxy"]["stakerNodeCoordinator"]["address"],
    )
    nodes = [Web3.to_checksum_address(n) for n in coordinator.functions.getAllNodes().call()]
    assert nodes
    assert sorted(StakerNode.objects.filter(lat=lat).values_list("address", flat=True)) == sorted(
        nodes
    )
    dm = chain.contract("DelegationManager", named["delegationManager"])
    for asset in NodeAsset.objects.filter(node__lat=lat).select_related("node"):
        (shares,), _ = dm.functions.getWithdrawableShares(
            asset.node.address, [asset.strategy_address]
        ).call()
        assert int(asset.core_shares) == shares
    assert NodeAsset.objects.filter(node__lat=lat).exists()


@pytest.mark.chain
def test_without_a_rewards_coordinator_the_gaps_say_what_is_unknown(chain, settings, tmp_path):
    import_manifests(chain, settings, tmp_path, without_eigenlayer(chain, "latETH"))
    lat = Lat.objects.get()
    refresh_state(lat=lat)
    lat.refresh_from_db()
    gaps = lat_gaps(lat=lat)
    assert len(gaps) == 3
    assert gaps[0].startswith("rewardsCoordinator unknown (no preset for chain 31337")
    assert gaps[0].endswith("APY from AVS rewards and operator splits unknown")
    assert gaps[1].startswith("avsDirectory unknown")
    assert gaps[2].startswith("allocationManager unknown")
    # Its nodes are delegated, yet no split is read without a coordinator.
    assert lat.staker_nodes.exclude(operator=None).exists()
    assert not OperatorAvsSplit.objects.filter(avs=lat.avs).exists()


def data_uri(document: dict) -> str:
    return (
        "data:application/json;base64," + base64.b64encode(json.dumps(document).encode()).decode()
    )


@pytest.mark.chain
def test_avs_metadata_from_the_allocation_manager_too_the_newest_winning(chain, settings, tmp_path):
    # latORB's AVS is an account, which calls the stand-in below itself.
    manifest = chain.lat("latORB")
    import_manifests(chain, settings, tmp_path, manifest)
    lat = Lat.objects.get()
    avs = manifest["avsAddress"]
    # An AllocationManager stand-in: its AVSMetadataURIUpdated has the AVSDirectory's signature.
    artifact = load_artifacts()["AVSDirectory"]
    factory = chain.w3.eth.contract(abi=artifact["abi"], bytecode=artifact["bytecode"])
    delegation_manager = manifest["eigenlayer"]["delegationManager"]
    receipt = chain.w3.eth.wait_for_transaction_receipt(
        factory.constructor(delegation_manager).transact({"from": chain.account(0)})
    )
    allocation_manager = contract(chain.w3, "AVSDirectory", receipt["contractAddress"])
    lat.allocation_manager = allocation_manager.address
    lat.save()

    newer = {"name": "From the AllocationManager", "website": "https://am.example"}
    tx = allocation_manager.functions.updateAVSMetadataURI(data_uri(newer)).transact({"from": avs})
    block = chain.w3.eth.wait_for_transaction_receipt(tx)["blockNumber"]
    avs_refresh_metadata(lat=lat)
    lat.avs.refresh_from_db()
    assert lat.avs.metadata_name == "From the AllocationManager"
    assert lat.avs.metadata_website == "https://am.example"
    assert lat.avs.metadata_updated_block == block

    # A later update through the AVSDirectory wins in turn.
    directory = chain.contract("AVSDirectory", manifest["eigenlayer"]["avsDirectory"])
    tx = directory.functions.updateAVSMetadataURI(data_uri({"name": "Directory again"})).transact(
        {"from": avs}
    )
    block = chain.w3.eth.wait_for_transaction_receipt(tx)["blockNumber"]
    avs_refresh_metadata(lat=lat)
    lat.avs.refresh_from_db()
    assert lat.avs.metadata_name == "Directory again"
    assert lat.avs.metadata_website is None
    assert lat.avs.metadata_updated_block == block


def test_without_avs_directory_or_allocation_manager_no_metadata_is_read():
    lat = f.LatFactory(chain_id=31337)  # no preset, no override
    assert avs_refresh_metadata(lat=lat) is False
    assert lat.sync_statuses.count() == 0


def test_gaps_of_a_unit_of_account_without_a_feed():
    token = f.address(0x70C)
    lat = f.LatFactory(
        chain_id=1,  # mainnet: every core contract preset
        base_asset=token,
    )
    assert lat_gaps(lat=lat) == [
        f"no price feed for the unit of account {token}: its values in ETH are unknown until "
        "staff set one (admin: Price feeds)"
    ]
    PriceFeed.objects.create(chain_id=1, token_address=token, feed_address=f.address(0xFEED))
    assert lat_gaps(lat=lat) == []


# --- no RewardsCoordinator known: the APY from rewards and the operator splits are null ---------


def test_without_a_rewards_coordinator_the_rewards_apy_and_operator_fee_are_null(api, dataset):
    lat = dataset.eth_lat
    Lat.objects.filter(pk=lat.pk).update(rewards_coordinator="")  # chain 31337: no preset
    snapshot_record(lat=lat, at=dt.datetime(2026, 3, 2, 12, tzinfo=dt.UTC))

    body = api.get(f"/lat/{lat.proxy_address}?withRewards=true").json()
    for window, values in body["apys"].items():
        assert values["apy"] is None, window
        assert values["totalApy"] is None, window
        assert values["nativeApy"] == "0", window  # what is known is served
        assert values["baseApy"] == "0", window
    # The LAT's nodes delegate to two operators, whose splits cannot be read.
    fees = api.get(f"/lat/{lat.proxy_address}/fees").json()["data"]
    assert fees["avgOperatorPerformanceFee"] is None
    assert fees["managementFee"] == 2.5
    points = api.get(
        f"/metrics/historical/lat/{lat.proxy_address}",
        {"startAt": "2026-03-01", "endAt": "2026-03-03"},
    ).json()["data"]
    assert points
    assert all(p["apy"] is None and p["totalApy"] is None for p in points)
    assert all(p["nativeApy"] == 0 for p in points)


def test_the_schema_documents_the_nulls():
    schema = SchemaGenerator().get_schema(request=None, public=True)
    components = schema["components"]["schemas"]

    def nullable(component: str, field: str) -> bool:
        return bool(components[component]["properties"][field].get("nullable"))

    assert nullable("ApyValues", "apy")
    assert nullable("ApyValues", "totalApy")
    assert not nullable("ApyValues", "nativeApy")
    assert nullable("HistoricalPoint", "apy")
    assert nullable("HistoricalPoint", "totalApy")
    assert nullable("FeeStructure", "avgOperatorPerformanceFee")
    assert (
        "RewardsCoordinator is unknown"
        in (components["FeeStructure"]["properties"]["avgOperatorPerformanceFee"]["description"])
    )


# --- a unit of account without a price feed: every value in ETH is null, amounts are known ------


def test_without_the_units_eth_price_values_in_eth_are_null(api, dataset):
    lat = dataset.native_lat  # unit of account NAT, 100 NAT held, pricePerUnit 1 NAT
    Token.objects.filter(pk=dataset.nat.pk).update(base_apy=4)
    node = f.StakerNodeFactory(lat=lat, address=f.address(0x3200), node_id=0, operator=dataset.op1)
    f.NodeAssetFactory(
        node=node,
        token=dataset.nat,
        strategy_address=f.address(0x5003),
        staked_amount=50 * 10**18,
        core_shares=50 * 10**18,
    )
    Holder.objects.create(lat=lat, address=f.address(0xE1), balance=10**19, first_block=1)
    Lat.objects.filter(pk=lat.pk).update(unit_eth_price=None)  # no feed yet

    tvl = api.get(f"/lat/{lat.proxy_address}", {"withTvl": "true"}).json()["tvl"]
    assert tvl == {
        "tvl": None,
        "unstakedTvl": None,
        "stakedTvl": None,
        "queuedTvl": None,
        "tvlAssets": {"NAT": 150.0},  # 100 held + 50 staked: known
        "tvlAssetsEth": {"NAT": None},
    }
    operator = api.get(f"/lat/operators/{dataset.op1.address}", {"withTvl": "true"}).json()
    assert operator["data"]["tvl"]["tvl"] is None
    assert operator["data"]["tvl"]["tvlStrategiesEth"]["NAT"] is None
    assert operator["data"]["tvl"]["tvlStrategies"]["NAT"] == 50.0
    wallet = api.get(f"/wallets/{f.address(0xE1)}").json()["data"]["positions"]
    assert [(p["balance"], p["valueEth"]) for p in wallet] == [("10000000000000000000", None)]
    snapshot = snapshot_record(lat=lat, at=dt.datetime(2026, 3, 2, 12, tzinfo=dt.UTC))
    assert (snapshot.total_tvl_eth, snapshot.staked_tvl_eth, snapshot.unstaked_tvl_eth) == (
        None,
        None,
        None,
    )
    lat.refresh_from_db()
    assert lat.apys["current"]["apy"] is None  # the stake's ETH value is unknown
    assert lat.apys["current"]["baseApy"] == "4"  # one token: its own yield

    # Staff set a feed; the state job reads it (here: 0.01 ETH per NAT, as the feed would say).
    Lat.objects.filter(pk=lat.pk).update(unit_eth_price=10**16)
    tvl = api.get(f"/lat/{lat.proxy_address}", {"withTvl": "true"}).json()["tvl"]
    assert tvl["tvl"] == 1.5  # 150 NAT at 0.01 ETH
    assert tvl["stakedTvl"] == 0.5
    wallet = api.get(f"/wallets/{f.address(0xE1)}").json()["data"]["positions"]
    assert wallet[0]["valueEth"] == 0.1  # 10 nLAT, 1 NAT each (100 / 100), at 0.01 ETH


def test_the_schema_documents_the_null_eth_values():
    schema = SchemaGenerator().get_schema(request=None, public=True)
    components = schema["components"]["schemas"]
    for component, fields in {
        "Tvl": ("tvl", "unstakedTvl", "stakedTvl", "queuedTvl"),
        "HistoricalPoint": ("totalTvlEth", "stakedTvlEth", "unstakedTvlEth"),
        "OperatorTvl": ("tvl",),
        "Position": ("valueEth",),
    }.items():
        for name in fields:
            assert components[component]["properties"][name].get("nullable"), (component, name)
    assert components["Tvl"]["properties"]["tvlAssetsEth"]["additionalProperties"]["nullable"]


@pytest.mark.chain
def test_a_delegation_manager_named_nowhere_fails_the_state_job_saying_so(
    chain, settings, tmp_path, monkeypatch
):
    """A manager without `delegationManager()` (the devnet's has it: the view's absence is
    stood in for) on a chain without a preset: the state job says what is missing, not that
    the node refused a call."""
    import_manifests(chain, settings, tmp_path, without_eigenlayer(chain, "latETH"))
    lat = Lat.objects.get()
    monkeypatch.setattr(
        "chain.gateway.Gateway.manager_core_contracts", lambda self, *, manager, block: {}
    )
    with pytest.raises(CoreContractUnknown, match="no DelegationManager is known for chain 31337"):
        refresh_state(lat=lat)
    status = lat.sync_statuses.get(job="state")
    assert status.last_error.startswith("CoreContractUnknown: no DelegationManager is known")
    assert "eigenlayer.delegationManager" in status.last_error
