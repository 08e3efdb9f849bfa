"""lat_import: a bad manifest is rejected whole with a message naming the field."""

from __future__ import annotations

import copy
import io
import json

import pytest
from django.core.management import CommandError, call_command

from lats.models import Avs, Lat, PriceFeed
from tests.ports import closed_port_url

pytestmark = [pytest.mark.django_db, pytest.mark.chain]


@pytest.fixture
def files(chain, settings, tmp_path):
    settings.RPC_URL = chain.url

    def write(*manifests) -> list[str]:
        paths = []
        for index, manifest in enumerate(manifests):
            path = tmp_path / f"m{index}.json"
            path.write_text(json.dumps(manifest) if not isinstance(manifest, str) else manifest)
            paths.append(str(path))
        return paths

    return write


def import_error(*paths: str) -> str:
    with pytest.raises(CommandError) as excinfo:
        call_command("lat_import", *paths)
    assert Lat.objects.count() == 0
    assert Avs.objects.count() == 0
    assert PriceFeed.objects.count() == 0
    return str(excinfo.value)


def test_imports_every_field(chain, files):
    paths = files(*chain.manifests)
    call_command("lat_import", *paths)
    assert Lat.objects.count() == 3
    orb = chain.lat("latORB")
    lat = Lat.objects.get(proxy_address=orb["proxyAddress"])
    assert lat.rewards_coordinator == orb["eigenlayer"]["rewardsCoordinator"]
    assert lat.avs_directory == orb["eigenlayer"]["avsDirectory"]
    assert lat.base_asset == orb["baseAsset"]
    feeds = {f.token_address: f.feed_address for f in PriceFeed.objects.all()}
    for token, feed in orb["priceFeeds"].items():
        assert feeds[token] == feed


def edited(chain, change) -> dict:
    manifest = copy.deepcopy(chain.lat("latETH"))
    change(manifest)
    return manifest


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda m: m.pop("proxyAddress"), "proxyAddress is missing"),
        (lambda m: m.update(chainId="31337"), "chainId must be a non-negative integer"),
        (lambda m: m.update(maxNodes=-1), "maxNodes must be a non-negative integer"),
        (
            lambda m: m["tokens"][1].update(strategy="0x1234"),
            "tokens[1].strategy must be an address",
        ),
        (
            lambda m: m["contractDeployments"]["proxy"].pop("stakerNodeCoordinator"),
            "contractDeployments.proxy.stakerNodeCoordinator is missing",
        ),
        (
            lambda m: m["contractDeployments"]["implementation"]["stakerNode"].pop("block"),
            "contractDeployments.implementation.stakerNode.block is missing",
        ),
        (lambda m: m["eigenlayer"].update(avsDirectory="nope"), "eigenlayer.avsDirectory must be"),
        (lambda m: m.update(tokens=7), "tokens must be an array or an object"),
        (lambda m: m.update(name=""), "name must be a non-empty string"),
    ],
)
def test_bad_field_rejects_the_whole_import(chain, files, change, field):
    # The good manifest comes first: nothing of it may be imported either.
    paths = files(chain.lat("latORB"), edited(chain, change))
    message = import_error(*paths)
    assert field in message
    assert "m1.json" in message


def test_unit_of_account_without_a_feed_imports_and_says_so(chain, files):
    manifest = copy.deepcopy(chain.lat("latORB"))
    manifest["priceFeeds"] = {}
    out = io.StringIO()
    call_command("lat_import", *files(manifest), stdout=out)
    lat = Lat.objects.get()
    assert lat.base_asset == manifest["baseAsset"]
    assert PriceFeed.objects.count() == 0
    assert f"no price feed for the unit of account {manifest['baseAsset']}" in out.getvalue()


def test_no_node_for_the_chain_names_its_setting(chain, files, settings):
    settings.RPC_URL = ""
    settings.RPC_URLS = {}
    message = import_error(*files(chain.lat("latETH")))
    assert "m0.json: chainId 31337: no node is configured for chain 31337" in message
    assert "RPC_URL_31337" in message


def test_a_node_that_cannot_be_reached_is_a_refusal(chain, files, settings):
    settings.RPC_URL = closed_port_url()
    message = import_error(*files(chain.lat("latETH")))
    assert "m0.json: the node for chain 31337 could not be asked" in message


def test_wrong_chain_id_is_rejected(chain, files):
    message = import_error(*files(edited(chain, lambda m: m.update(chainId=1))))
    assert "chainId is 1 but the node is on chain 31337" in message


def test_address_without_code_is_rejected(chain, files):
    empty = "0x00000000000000000000000000000000DeaDBeef"
    message = import_error(*files(edited(chain, lambda m: m.update(proxyAddress=empty))))
    assert f"proxyAddress {empty} holds no contract code" in message


def test_not_json_is_rejected(files):
    assert "is not JSON" in import_error(*files("{not json"))


def test_missing_file_is_rejected(tmp_path):
    assert "cannot be read" in import_error(str(tmp_path / "absent.json"))
