from __future__ import annotations

import datetime as dt
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from rest_framework.test import APIClient
from web3 import Web3
from web3.contract import Contract

from devchain.anvil import AnvilNode, start_anvil
from devchain.devnet import connect, contract, deploy_devnet, devnet_genesis, service_manifest

# The headless browser (`browser`) for the tests that use the service as a browser does.
pytest_plugins = ["tests.browser"]

# Shared helper modules that assert: their failures are reported like a test module's.
pytest.register_assert_rewrite("tests.freshness", "tests.lockholder", "tests.served")


@pytest.fixture(autouse=True)
def _fresh_documents() -> None:
    """Cached read documents from an earlier test (rolled back) are never served."""
    from core.api.documents import _bump, _bump_local

    _bump()
    _bump_local()


@pytest.fixture
def minute_window() -> None:
    """At least 10 s left in the current minute, so that a test's requests all fall in one of
    the rate limits' fixed windows (a minute, and so an hour and a day too)."""
    left = 60 - time.time() % 60
    if left < 10:
        time.sleep(left + 0.05)


@pytest.fixture
def api() -> APIClient:
    return APIClient()


class Dataset:
    """A small world written by hand; the tests compute expected values from it by hand."""


@pytest.fixture
def dataset(db) -> Dataset:
    from core.addresses import BEACON_CHAIN_ETH
    from tests import factories as f

    d = Dataset()
    d.avs = f.AvsFactory(
        address=f.address(0xA1),
        metadata_name="Example AVS",
        metadata_description="Validates examples.",
        metadata_website="https://avs.example",
        metadata_logo="https://avs.example/logo.png",
        metadata_social="https://x.com/avs",
        tags=["oracle", "restaking"],
    )
    d.steth = f.TokenFactory(
        address=f.address(0x5E), symbol="stETH", name="Staked Ether", decimals=18, ref_id=8085
    )
    d.usdx = f.TokenFactory(address=f.address(0x6D), symbol="USDx", name="Dollar X", decimals=6)
    d.nat = f.TokenFactory(
        address=f.address(0x7A), symbol="NAT", name="Native AVS Token", decimals=18
    )
    d.eth_lat = f.LatFactory(
        proxy_address=f.address(0x1001),
        implementation_address=f.address(0x2001),
        name="Example ETH LAT",
        symbol="eLAT",
        avs=d.avs,
        base_asset=BEACON_CHAIN_ETH,
        max_nodes=5,
        total_assets=20 * 10**18,
        total_supply=16 * 10**18,
        rewards_coordinator=f.address(0xC0),  # chain 31337 has no preset: named, as a devnet does
        contract_deployments={
            "implementation": {"liquidTokenManager": f.address(0x3001)},
            "proxy": {"liquidTokenManager": f.address(0x3002)},
        },
    )
    d.eth_steth = f.LatTokenFactory(
        lat=d.eth_lat,
        token=d.steth,
        strategy_address=f.address(0x5001),
        volatility_threshold=5 * 10**16,
        price_per_unit=10**18,
        balance=10 * 10**18,
        queued_balance=2 * 10**18,
    )
    d.eth_usdx = f.LatTokenFactory(
        lat=d.eth_lat,
        token=d.usdx,
        strategy_address=f.address(0x5002),
        price_per_unit=5 * 10**14,
        balance=1000 * 10**6,
        queued_balance=0,
    )
    d.native_avs = f.AvsFactory(address=f.address(0xA2), metadata_token_address=d.nat.address)
    d.native_lat = f.LatFactory(
        proxy_address=f.address(0x1002),
        implementation_address=f.address(0x2002),
        name="Native LAT",
        symbol="nLAT",
        avs=d.native_avs,
        base_asset=d.nat.address,
        base_asset_symbol="NAT",
        max_nodes=3,
        unit_eth_price=10**16,
        rewards_coordinator=f.address(0xC0),
        total_assets=100 * 10**18,
        total_supply=100 * 10**18,
    )
    d.native_nat = f.LatTokenFactory(
        lat=d.native_lat,
        token=d.nat,
        strategy_address=f.address(0x5003),
        price_per_unit=10**18,
        balance=100 * 10**18,
    )
    f.FeeStructureFactory(lat=d.eth_lat, management_fee="2.5", performance_fee="10")
    d.op1 = f.OperatorFactory(
        address=f.address(0x901),
        metadata_name="Operator One",
        metadata_website="https://one.example",
    )
    d.op2 = f.OperatorFactory(address=f.address(0x902))
    f.OperatorAvsSplitFactory(operator=d.op1, avs=d.avs, split_bips=500)
    d.node0 = f.StakerNodeFactory(
        lat=d.eth_lat, address=f.address(0x3100), node_id=0, operator=d.op1
    )
    d.node1 = f.StakerNodeFactory(
        lat=d.eth_lat, address=f.address(0x3101), node_id=1, operator=d.op2
    )
    d.node2 = f.StakerNodeFactory(
        lat=d.eth_lat, address=f.address(0x3102), node_id=2, operator=None
    )
    f.NodeAssetFactory(
        node=d.node0,
        token=d.steth,
        strategy_address=f.address(0x5001),
        staked_amount=5 * 10**18,
        core_shares=4 * 10**18,
    )
    f.NodeAssetFactory(
        node=d.node0,
        token=d.usdx,
        strategy_address=f.address(0x5002),
        staked_amount=2000 * 10**6,
        core_shares=1900 * 10**6,
    )
    f.NodeAssetFactory(
        node=d.node1,
        token=d.steth,
        strategy_address=f.address(0x5001),
        staked_amount=3 * 10**18,
        core_shares=3 * 10**18,
    )
    return d


# --- the chain: two devnets per test worker, each deployed once, reverted per test ---------
#
# Every test that uses `chain` (or `devnet`) runs on both: "multicall3", where Multicall3 has code
# at its canonical address, and "plain", a chain without it (the gateway's helper-free route).
# Each is its own anvil, started and deployed the first time a test needs it and kept for the
# rest of the session, so that pytest's switching between the two parameters costs nothing.

DEVNET_KINDS = ("multicall3", "plain")


@dataclass
class Devnet:
    kind: str
    node: AnvilNode
    manifests: list[dict[str, Any]]  # the service's format (chain.md's first section)
    published: list[dict[str, Any]]  # the same LATs as deployment repositories publish them

    @property
    def multicall(self) -> bool:
        return self.kind == "multicall3"


@pytest.fixture(scope="session")
def _devnets() -> Iterator[dict[str, Devnet]]:
    started: dict[str, Devnet] = {}
    yield started
    for devnet in started.values():
        devnet.node.stop()


@pytest.fixture(scope="session", params=DEVNET_KINDS)
def devnet_kind(request: pytest.FixtureRequest, _devnets: dict[str, Devnet]) -> Devnet:
    """One of the two devnets (a fresh anvil on a free 127.0.0.1 port, per test worker, with
    the demo LATs deployed before any snapshot)."""
    kind = request.param
    if kind not in _devnets:
        node = start_anvil(timestamp=devnet_genesis())
        try:
            published = deploy_devnet(node.url, multicall=kind == "multicall3", published=True)
        except BaseException:
            node.stop()
            raise
        manifests = [service_manifest(m) for m in published]
        _devnets[kind] = Devnet(kind, node, manifests, published)
    return _devnets[kind]


@pytest.fixture(scope="session")
def anvil_node(devnet_kind: Devnet) -> AnvilNode:
    """The anvil of the devnet under test."""
    return devnet_kind.node


@pytest.fixture(scope="session")
def devnet(devnet_kind: Devnet) -> list[dict[str, Any]]:
    """The demo LAT manifests of the devnet under test."""
    return devnet_kind.manifests


@dataclass
class Chain:
    url: str
    w3: Web3
    manifests: list[dict[str, Any]]
    kind: str = "multicall3"  # or "plain": no Multicall3 on this chain
    published: list[dict[str, Any]] = field(default_factory=list)  # as repositories publish them

    @property
    def multicall(self) -> bool:
        return self.kind == "multicall3"

    def lat(self, symbol: str) -> dict[str, Any]:
        return next(m for m in self.manifests if m["symbol"] == symbol)

    def contract(self, name: str, address: str) -> Contract:
        return contract(self.w3, name, address)

    def account(self, index: int) -> str:
        return Web3.to_checksum_address(self.w3.eth.accounts[index])

    def rpc(self, method: str, *params: Any) -> Any:
        response = self.w3.provider.make_request(method, list(params))
        if "error" in response:
            raise RuntimeError(f"{method}: {response['error']}")
        return response["result"]


@pytest.fixture
def chain(devnet_kind: Devnet) -> Iterator[Chain]:
    """The devnet, with whatever the test does undone afterwards (evm_snapshot/evm_revert)."""
    w3 = connect(devnet_kind.node.url)
    state = Chain(
        devnet_kind.node.url, w3, devnet_kind.manifests, devnet_kind.kind, devnet_kind.published
    )
    snapshot = state.rpc("evm_snapshot")
    try:
        yield state
    finally:
        if not state.rpc("evm_revert", snapshot):
            raise RuntimeError(f"evm_revert({snapshot}) failed")


@pytest.fixture
def imported(chain: Chain, settings, tmp_path) -> Chain:
    """The devnet's LATs registered in the database (lat_import), nothing refreshed yet."""
    from django.core.management import call_command

    from devchain.devnet import write_manifests

    settings.RPC_URL = chain.url
    call_command("lat_import", *map(str, write_manifests(chain.manifests, tmp_path)))
    return chain


@pytest.fixture
def synced(chain: Chain, settings, tmp_path) -> Chain:
    """The devnet's LATs imported and synced straight from anvil."""
    from django.core.management import call_command

    from devchain.devnet import write_manifests

    settings.RPC_URL = chain.url
    call_command("lat_import", *map(str, write_manifests(chain.manifests, tmp_path)))
    call_command("lat_sync", "--no-progress")
    return chain


# --- Redis of a test module's own ------------------------------------------------------------


@pytest.fixture(scope="module")
def redis_server():
    """A redis-server of the test module's own, on a free port, that its tests may stop,
    freeze or restart (tests/redisserver.py)."""
    from tests.redisserver import RedisServer

    server = RedisServer()
    server.start()
    yield server
    server.close()


# --- Celery -----------------------------------------------------------------------------------


@pytest.fixture
def eager() -> Iterator[None]:
    """Publishing runs the task in-process (for the fan-out tasks), not through the broker."""
    from latsite.celery import app as celery_app

    # Tasks published by name run in-process only once their modules are imported, as a worker
    # imports them at start (otherwise NotRegistered, depending on which tests ran before).
    celery_app.loader.import_default_modules()
    before = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = True
    yield
    celery_app.conf.task_always_eager = before


# --- the admin --------------------------------------------------------------------------------


# The timestamps of world's rows.
T0 = dt.datetime(2026, 3, 1, tzinfo=dt.UTC)


@pytest.fixture
def world(dataset):
    """The data set, plus one row of every model the admin shows that it lacks."""
    from activity.store import activity_record
    from deposits.models import DepositCheckpoint
    from deposits.services import deposit_record_events
    from lats.models import PriceFeed, SyncStatus
    from metrics.models import AvsDay, AvsEvent, LatDay, RewardSubmission, UsdPrice
    from tests import factories as f
    from tests.factories import event

    A = f.address
    SyncStatus.objects.create(lat=dataset.eth_lat, job="state", last_success_at=T0, last_block=120)
    SyncStatus.objects.create(
        lat=dataset.eth_lat,
        job="deposits",
        last_error="ChainUnavailable: the node could not be reached",
        last_error_at=T0,
        consecutive_failures=3,
    )
    PriceFeed.objects.create(
        chain_id=31337, token_address=dataset.nat.address, feed_address=A(0xF1), answer=10**16
    )
    deposit_record_events(lat=dataset.eth_lat, events=[event(10, 0), event(11, 1)])
    DepositCheckpoint.objects.create(
        lat=dataset.eth_lat, block_number=11, block_hash="0x" + "1" * 64
    )
    activity_record(
        lat=dataset.eth_lat,
        logs=[f.transfer_log(10, 1, A(0), A(0xA1), 5), f.transfer_log(11, 2, A(0xA1), A(0xA2), 2)],
        timestamps={10: 1_772_323_200, 11: 1_772_323_212},
    )
    f.MetricSnapshotFactory(lat=dataset.eth_lat, timestamp=T0, total_assets=1, total_supply=1)
    RewardSubmission.objects.create(
        avs=dataset.avs,
        chain_id=31337,
        tx_hash="0x" + "2" * 64,
        log_index=0,
        block_number=9,
        token=dataset.steth.address,
        amount=10**18,
        start_timestamp=0,
        duration=86400,
        strategies=[A(0x5001)],
        multipliers=[str(10**18)],
    )
    AvsEvent.objects.create(
        avs=dataset.avs,
        kind=AvsEvent.Kind.REGISTRATION,
        name="OperatorAVSRegistrationStatusUpdated",
        chain_id=31337,
        tx_hash="0x" + "3" * 64,
        log_index=0,
        block_number=8,
        block_hash="0x" + "4" * 64,
        block_timestamp=1_772_236_800,
        operator=A(0x901),
        value=1,
    )
    AvsDay.objects.create(
        avs=dataset.avs, day=T0.date(), block_number=9, block_hash="0x" + "5" * 64
    )
    LatDay.objects.create(
        lat=dataset.eth_lat,
        day=T0.date(),
        block_number=9,
        block_hash="0x" + "5" * 64,
        total_assets=1,
        total_supply=1,
    )
    UsdPrice.objects.create(
        chain_id=31337,
        feed_address=A(0xF2),
        answer=3000 * 10**8,
        decimals=8,
        block_number=9,
        updated_at=T0,
    )
    return dataset


@pytest.fixture
def viewer(db):
    """Staff who may view every model and change nothing."""
    from django.contrib.auth.models import Permission, User

    user = User.objects.create_user("viewer", password="viewer-password-1", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(codename__startswith="view_"))
    return user


@pytest.fixture
def viewer_client(client, viewer):
    client.force_login(viewer)
    return client


# --- staff groups (lats/migrations/0004_staff_groups.py) ---------------------------------------


@pytest.fixture
def staff_groups(db):
    """The groups as the migration makes them. Made again here: a transactional test's flush
    empties every table, the migration's rows too (Django re-runs only post_migrate)."""
    import importlib

    from django.apps import apps

    migration = importlib.import_module("lats.migrations.0004_staff_groups")
    migration.create_groups(apps, None)
    return migration


@pytest.fixture
def staff_member(staff_groups):
    """make(name, group, password=None): a staff user in one of the groups."""
    from django.contrib.auth.models import Group, User

    def make(name: str, group: str, password: str | None = None) -> User:
        user = User.objects.create_user(name, password=password, is_staff=True)
        user.groups.add(Group.objects.get(name=group))
        return user

    return make


def pytest_collection_modifyitems(items) -> None:
    """Behind a pooler (DATABASE_DIRECT_URL set: tests/replicas/test_pooler.py) the sessions of
    their own (advisory locks, LISTEN) use the `direct` alias, a mirror of the test database:
    every test that may use the database may use it too."""
    from django.conf import settings

    if "direct" not in settings.DATABASES:
        return
    for item in items:
        for marker in item.iter_markers("django_db"):
            if "databases" not in marker.kwargs:
                marker.kwargs["databases"] = ["default", "direct"]  # type: ignore[index]
