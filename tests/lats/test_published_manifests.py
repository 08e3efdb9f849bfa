"""lat_import of the manifests as LAT deployment repositories publish them (chain.md, "Deployments
as they are published"): the two public ones (tests/data/published-manifests/, copied unchanged
from the shared fixtures), a deployments folder, re-imports of newer versions, and refusals
that name the file and the field. No chain is needed: --skip-chain-check."""

from __future__ import annotations

import copy
import datetime as dt
import io
import json
from decimal import Decimal
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from core.addresses import checksum
from deposits.models import Deposit
from deposits.services import deposit_record_events
from lats.manifests import manifest_parse, version_key
from lats.models import Avs, Lat, PriceFeed
from lats.networks import NETWORKS
from metrics.models import MetricSnapshot
from tests import factories as f
from tests.adminpages import change_url, changelist_url, form_data

pytestmark = pytest.mark.django_db

DATA = Path(__file__).resolve().parents[1] / "data" / "published-manifests"
HOLESKY = DATA / "holesky-xeigenda-v1-info.json"
MAINNET = DATA / "mainnet-xlagrange-deployment_data.json"
ETH = "0xbeaC0eeEeeeeEEeEeEEEEeeEEeEeeeEeeEEBEaC0"

# EigenLayer's core contracts, copied by hand from the README of Layr-Labs/eigenlayer-contracts
# (mainnet at f84a515, Holesky at ec8eac2, the last commit before Holesky was removed).
MAINNET_CORE = {
    "delegationManager": "0x39053D51B77DC0d36036Fc1fCc8Cb819df8Ef37A",
    "strategyManager": "0x858646372CC42E1A627fcE94aa7A7033e7CF075A",
    "rewardsCoordinator": "0x7750d328b314EfFa365A0402CcfD489B80B0adda",
    "avsDirectory": "0x135dda560e946695d6f155dacafc6f1f25c1f5af",
    "allocationManager": "0x948a420b8CC1d6BFd0B6087C2E7c344a2CD0bc39",
}
HOLESKY_CORE = {
    "delegationManager": "0xA44151489861Fe9e3055d95adC98FbD462B948e7",
    "strategyManager": "0xdfB5f6CE42aAA7830E94ECFCcAd411beF4d4D5b6",
    "rewardsCoordinator": "0xAcc1fb458a1317E886dB376Fc8141540537E68fE",
    "avsDirectory": "0x055733000064333CaDDbC92763c58BF0192fFeBf",
    "allocationManager": "0x78469728304326CBc65f8f95FA756B0B73164462",
}


def lat_import(*paths, check: bool = False) -> str:
    out = io.StringIO()
    args = [str(p) for p in paths] + ([] if check else ["--skip-chain-check"])
    call_command("lat_import", *args, stdout=out)
    return out.getvalue()


def refused(*paths, check: bool = False) -> str:
    with pytest.raises(CommandError) as excinfo:
        lat_import(*paths, check=check)
    assert Lat.objects.count() == 0
    assert Avs.objects.count() == 0
    return str(excinfo.value)


def read(path: Path) -> dict:
    return json.loads(path.read_text())


def assert_stored_as_in_file(lat: Lat, data: dict) -> None:
    """Every member the service stores, against the file as the test reads it."""
    assert lat.proxy_address == data["proxyAddress"]
    assert lat.implementation_address == data["implementationAddress"]
    assert lat.name == data["name"]
    assert lat.symbol == data["symbol"]
    assert lat.chain_id == data["chainId"]
    assert (lat.avs.chain_id, lat.avs.address) == (data["chainId"], data["avsAddress"])
    assert lat.max_nodes == data["maxNodes"]
    assert lat.deployment_block == data["deploymentBlock"]
    assert lat.contract_deployments == {
        kind: {name: entry["address"] for name, entry in data["contractDeployments"][kind].items()}
        for kind in ("implementation", "proxy")
    }
    assert lat.manifest == data  # every member kept, unknown ones too (roles, timestamps, ...)


def test_the_published_manifests_import_with_every_field(capsys):
    out = lat_import(HOLESKY, MAINNET)
    assert Lat.objects.count() == 2
    holesky = Lat.objects.get(symbol="xEIGEN")
    mainnet = Lat.objects.get(symbol="xLagrange")
    assert_stored_as_in_file(holesky, read(HOLESKY))
    assert_stored_as_in_file(mainnet, read(MAINNET))

    # Written by hand from the files.
    assert holesky.proxy_address == "0xaA4398A908CaE395dFf7F5D620E5899905b52723"
    assert holesky.implementation_address == "0x57B52855dE5581D978aeb502D22D9C1673D0EDD2"
    assert holesky.deployment_block == 3595322
    assert holesky.proxy_of("tokenRegistryOracle") == "0x849d0e4C0C3988D4390f5Ee46c8FA110F1e96e4b"
    assert holesky.manifest["roles"]["priceUpdater"] == "0x48F8BE189372d8aE0Aca865330E918570623B2fa"
    assert holesky.manifest["deploymentTimestamp"] == 1743498876000
    assert holesky.manifest["tokens"]["9"]["strategy"] == (
        "0x80528D6e9A2BAbFc766965E0E26d5aB08D9CFaF9"
    )
    assert mainnet.proxy_address == "0x94EDc320466d68c0e80C3e6F454375Fb957e1038"
    assert mainnet.avs.address == "0x22CAc0e6A1465F043428e8AeF737b3cb09D0eEDa"
    assert mainnet.proxy_of("liquidTokenManager") == "0x062C88B4ba954955746eDA6f475C26eeaC04614B"

    # baseAsset missing (Holesky v1) means ETH, and the import says so.
    assert holesky.base_asset == ETH
    assert mainnet.base_asset == "0x0fc2a55d5BD13033f1ee0cdd11f60F7eFe66f467"
    assert "baseAsset missing: the unit of account is ETH" in out
    # The LA token as unit of account has no price feed: imported all the same, and said.
    assert PriceFeed.objects.count() == 0
    assert "no price feed for the unit of account 0x0fc2a55d5BD13033f1ee0cdd11f60F7eFe66f467" in out
    assert "created xEIGEN 0xaA4398A908CaE395dFf7F5D620E5899905b52723 (chain 17000)" in out
    assert "created xLagrange 0x94EDc320466d68c0e80C3e6F454375Fb957e1038 (chain 1)" in out

    # No `eigenlayer` member: the networks' presets are used, nothing is stored as an override.
    for lat, core in ((mainnet, MAINNET_CORE), (holesky, HOLESKY_CORE)):
        for name, address in core.items():
            assert getattr(lat, Lat.OVERRIDE_FIELDS[name]) == ""
            assert lat.core_contract(name) == checksum(address)
    assert "EigenLayer preset" not in out


def test_importing_again_changes_nothing():
    lat_import(HOLESKY, MAINNET)
    before = list(Lat.objects.order_by("id").values())
    out = lat_import(HOLESKY, MAINNET)
    assert list(Lat.objects.order_by("id").values()) == before
    assert "unchanged xEIGEN" in out
    assert "unchanged xLagrange" in out


def test_our_own_array_form_still_imports(tmp_path):
    data = read(HOLESKY)
    data["tokens"] = [data["tokens"][str(i)] for i in range(len(data["tokens"]))]
    data["baseAsset"] = ETH
    data["eigenlayer"] = {"rewardsCoordinator": "0x" + "ab" * 20}
    path = tmp_path / "own.json"
    path.write_text(json.dumps(data))
    out = lat_import(path)
    lat = Lat.objects.get()
    assert lat.manifest["tokens"][9]["address"] == "0x94373a4919B3240D86eA41593D5eBa789FEF3848"
    # The manifest's `eigenlayer` member overrides the preset; the others stay the preset's.
    assert lat.rewards_coordinator == checksum("0x" + "ab" * 20)
    assert lat.core_contract("rewardsCoordinator") == checksum("0x" + "ab" * 20)
    assert lat.core_contract("avsDirectory") == HOLESKY_CORE["avsDirectory"]
    assert "baseAsset missing" not in out


def test_unknown_members_are_kept_never_refused(tmp_path):
    data = read(MAINNET)
    data["futureMember"] = {"anything": [1, 2, 3]}
    data["contractDeployments"]["proxy"]["withdrawalManager"] = {"address": "0x" + "12" * 20}
    data["eigenlayer"] = {"eigenPodManager": "not read"}
    path = tmp_path / "future.json"
    path.write_text(json.dumps(data))
    lat_import(path)
    lat = Lat.objects.get()
    assert lat.manifest["futureMember"] == {"anything": [1, 2, 3]}
    assert lat.manifest["eigenlayer"] == {"eigenPodManager": "not read"}
    assert lat.core_contract("delegationManager") == MAINNET_CORE["delegationManager"]


def write_info(root: Path, network: str, lat: str, version: str, data: dict) -> Path:
    folder = root / network / lat / version
    folder.mkdir(parents=True)
    (folder / "info.json").write_text(json.dumps(data))
    (folder / "config.json").write_text("{}")  # beside it, as in the repository: not read
    return folder / "info.json"


def version_of(data: dict, n: int) -> dict:
    """The Holesky manifest as a later version n would publish it: the same proxy, a new
    implementation and new proxied contracts, a later deployment block."""
    data = copy.deepcopy(data)
    data["implementationAddress"] = "0x" + f"{n:02x}" * 20
    proxies = data["contractDeployments"]["proxy"]
    proxies["liquidTokenManager"]["address"] = "0x" + f"{n:02x}" * 19 + "01"
    data["deploymentBlock"] += n * 1000
    return data


def test_a_deployments_folder_imports_each_lat_once_at_its_newest_version(tmp_path):
    holesky = read(HOLESKY)
    root = tmp_path / "lat-deployments"
    write_info(root, "holesky", "xeigenda", "v1", holesky)
    write_info(root, "holesky", "xeigenda", "v2", version_of(holesky, 2))
    write_info(root, "holesky", "xeigenda", "v10", version_of(holesky, 10))  # newer than v2
    write_info(root, "mainnet", "xlagrange", "v1", read(MAINNET))
    out = lat_import(root)
    assert Lat.objects.count() == 2
    lat = Lat.objects.get(symbol="xEIGEN")
    assert lat.manifest_version == "v10"
    assert lat.implementation_address == checksum("0x" + "0a" * 20)
    assert lat.proxy_of("liquidTokenManager") == checksum("0x" + "0a" * 19 + "01")
    assert lat.deployment_block == 3595322 + 10_000  # the first import of the LAT
    assert Lat.objects.get(symbol="xLagrange").manifest_version == "v1"
    assert out.count("created ") == 2
    assert "(chain 17000, v10)" in out


def test_a_newer_version_updates_the_lat_and_keeps_its_history(tmp_path):
    holesky = read(HOLESKY)
    root = tmp_path / "deployments"
    write_info(root, "holesky", "xeigenda", "v1", holesky)
    lat_import(root)
    lat = Lat.objects.get()
    deposit_record_events(lat=lat, events=[f.event(3_600_000, 0)])
    node = f.StakerNodeFactory(lat=lat)
    snapshot = f.MetricSnapshotFactory(
        lat=lat,
        timestamp=dt.datetime(2026, 3, 1, tzinfo=dt.UTC),
        total_tvl_eth=Decimal(1),
        staked_tvl_eth=Decimal(1),
        unstaked_tvl_eth=Decimal(0),
    )

    write_info(root, "holesky", "xeigenda", "v2", version_of(holesky, 2))
    out = lat_import(root)
    assert "updated xEIGEN" in out
    updated = Lat.objects.get()
    assert updated.pk == lat.pk
    assert updated.manifest_version == "v2"
    assert updated.implementation_address == checksum("0x" + "02" * 20)
    assert updated.proxy_of("liquidTokenManager") == checksum("0x" + "02" * 19 + "01")
    # Its history stays, and it is still indexed from its first deployment block.
    assert updated.deployment_block == 3595322
    assert Deposit.objects.filter(lat=updated).count() == 1
    assert updated.staker_nodes.get() == node
    assert MetricSnapshot.objects.get(lat=updated) == snapshot

    # An older version imported afterwards does not undo it.
    older = tmp_path / "older"
    write_info(older, "holesky", "xeigenda", "v1", holesky)
    out = lat_import(older)
    assert "kept xEIGEN" in out
    assert Lat.objects.get().implementation_address == checksum("0x" + "02" * 20)


def test_versions_compare_as_numbers():
    names = ["v10", "v2", "v1.0.10", "v1", "v2-rc1", "v1.0.2", "latest", "v1.1"]
    assert sorted(names, key=version_key) == [
        "latest",
        "v1",
        "v1.0.2",
        "v1.0.10",
        "v1.1",
        "v2-rc1",
        "v2",
        "v10",
    ]


def test_a_unit_of_account_set_in_admin_survives_a_reimport_without_base_asset():
    lat_import(HOLESKY)
    token = "0x3F1c547b21f65e10480dE3ad8E19fAAC46C95034"
    Lat.objects.update(base_asset=token)
    out = lat_import(HOLESKY)
    assert Lat.objects.get().base_asset == token
    assert f"keeping the unit of account {token} set in admin" in out
    assert f"no price feed for the unit of account {token}" in out


def test_no_node_for_the_chain_is_a_clear_error(settings):
    settings.RPC_URL = ""
    settings.RPC_URLS = {}
    message = refused(MAINNET, check=True)
    assert str(MAINNET) in message
    assert "RPC_URL_1" in message
    assert "--skip-chain-check" in message
    assert "Traceback" not in message


def edited(tmp_path: Path, change, source: Path = HOLESKY) -> Path:
    data = read(source)
    change(data)
    path = tmp_path / "edited-info.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda m: m["tokens"].update({"x": {}}), 'tokens has a key that is not an index ("0"'),
        (
            lambda m: m["tokens"]["3"].update(strategy="0x1234"),
            "tokens.3.strategy must be an address",
        ),
        (lambda m: m["tokens"]["0"].pop("address"), "tokens.0.address is missing"),
        (lambda m: m.update(tokens="all"), "tokens must be an array or an object"),
        (lambda m: m.update(baseAsset="ETH"), "baseAsset must be an address"),
        (lambda m: m.update(deploymentBlock="3595322"), "deploymentBlock must be a non-negative"),
        (
            lambda m: m["contractDeployments"]["proxy"].pop("tokenRegistryOracle"),
            "contractDeployments.proxy.tokenRegistryOracle is missing",
        ),
        (lambda m: m.update(eigenlayer=["x"]), "eigenlayer must be an object"),
        (
            lambda m: m.update(eigenlayer={"avsDirectory": "0x12"}),
            "eigenlayer.avsDirectory must be an address",
        ),
    ],
)
def test_every_refusal_names_the_file_and_the_field(tmp_path, change, field):
    path = edited(tmp_path, change)
    message = refused(MAINNET, path)  # the good one first: nothing of it is imported either
    assert message.startswith(f"{path}: ")
    assert field in message


def test_a_folder_without_manifests_is_refused(tmp_path):
    (tmp_path / "empty" / "holesky").mkdir(parents=True)
    message = refused(tmp_path / "empty")
    assert str(tmp_path / "empty") in message
    assert "<network>/<lat>/<version>/info.json" in message


def test_the_same_lat_twice_is_refused_naming_both_files(tmp_path):
    copy_path = tmp_path / "copy.json"
    copy_path.write_text(HOLESKY.read_text())
    message = refused(HOLESKY, copy_path)
    assert str(copy_path) in message
    assert str(HOLESKY) in message
    assert "proxyAddress 0xaA4398A908CaE395dFf7F5D620E5899905b52723" in message


def test_presets_are_the_published_tables():
    assert NETWORKS[1].eigenlayer == {k: checksum(v) for k, v in MAINNET_CORE.items()}
    assert NETWORKS[17000].eigenlayer == HOLESKY_CORE
    assert NETWORKS[11155111].eigenlayer["delegationManager"] == (
        "0xD4A7E1Bd8015057293f0D0A557088c286942e84b"
    )
    assert NETWORKS[560048].eigenlayer["allocationManager"] == (
        "0x95a7431400F362F3647a69535C5666cA0133CAA0"
    )
    for network in NETWORKS.values():
        assert set(network.eigenlayer) == set(Lat.OVERRIDE_FIELDS)
        for address in network.eigenlayer.values():
            assert checksum(address) == address  # stored in EIP-55 form


# --- admin: the stored manifest shown, the unit of account and the overrides edited ------------


def test_admin_shows_the_manifest_and_edits_unit_of_account_and_overrides(admin_client):
    lat_import(HOLESKY)
    lat = Lat.objects.get()
    url = change_url(lat)
    page = admin_client.get(url)
    body = page.content.decode()
    assert "deploymentTimestamp" in body  # the manifest's members, unknown ones too
    assert "0x48F8BE189372d8aE0Aca865330E918570623B2fa" in body  # roles.priceUpdater
    assert HOLESKY_CORE["rewardsCoordinator"] in body  # the preset in use
    data = form_data(page)
    assert data["base_asset"] == ETH
    token = "0x3f1c547b21f65e10480de3ad8e19faac46c95034"  # any letter case
    data.update({"base_asset": token, "rewards_coordinator": "0x" + "cd" * 20})
    response = admin_client.post(url, data)
    assert response.status_code == 302, response.context["errors"] if response.context else ""
    lat.refresh_from_db()
    assert lat.base_asset == "0x3F1c547b21f65e10480dE3ad8E19fAAC46C95034"
    assert lat.rewards_coordinator == checksum("0x" + "cd" * 20)
    assert lat.core_contract("rewardsCoordinator") == checksum("0x" + "cd" * 20)
    assert lat.avs_directory == ""  # left blank: the preset
    assert lat.core_contract("avsDirectory") == HOLESKY_CORE["avsDirectory"]
    # The new unit of account has no feed: the LAT's sync status says so.
    listing = admin_client.get(changelist_url(Lat)).content.decode()
    assert "no price feed for the unit of account 0x3F1c547b21f65e10480dE3ad8E19fAAC46C95034" in (
        listing
    )
    # The manifest itself is not editable.
    data = form_data(admin_client.get(url))
    assert "manifest" not in data


def test_the_deployments_repository_as_it_is_laid_out(tmp_path):
    """EigenExplorer/lat-deployments as it stands: most LATs under a version folder, one
    (mainnet/xeigenda-eth) with its info.json straight in the LAT folder, `abi/` folders and
    a README beside them; token keys past "9" sort as text in the file ("10" before "2")."""
    root = tmp_path / "lat-deployments"
    holesky = read(HOLESKY)
    write_info(root, "holesky", "xeigenda", "v1", holesky)
    newest = write_info(root, "holesky", "xeigenda", "v3", version_of(holesky, 3))
    (newest.parent / "abi").mkdir()
    (newest.parent / "abi" / "LiquidToken.json").write_text("[]")
    (root / "README.md").write_text("# deployments")
    unversioned = read(MAINNET)
    unversioned["proxyAddress"] = "0x94A2a0548681Fda8D5e2AD5A8EeecD891E02a613"
    unversioned["symbol"] = "xEigenDA-ETH"
    unversioned["tokens"] = {
        str(i): {"address": "0x" + f"{i + 1:040x}", "strategy": "0x" + f"{i + 100:040x}"}
        for i in (0, 1, 10, 11, 2)
    }
    (root / "mainnet" / "xeigenda-eth").mkdir(parents=True)
    (root / "mainnet" / "xeigenda-eth" / "info.json").write_text(json.dumps(unversioned))
    out = lat_import(root)
    assert sorted(Lat.objects.values_list("symbol", "manifest_version")) == [
        ("xEIGEN", "v3"),
        ("xEigenDA-ETH", ""),
    ]
    assert "created xEigenDA-ETH 0x94A2a0548681Fda8D5e2AD5A8EeecD891E02a613 (chain 1)" in out
    # Read in the order of the keys' numbers, not the file's.
    parsed = manifest_parse(unversioned, source="info.json")
    assert [address for address, _ in parsed.tokens] == [
        checksum("0x" + f"{i + 1:040x}") for i in (0, 1, 2, 10, 11)
    ]
