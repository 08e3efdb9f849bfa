"""python manage.py lat_devnet, with and without Multicall3, on an anvil of the test's own."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command
from web3 import Web3

from devchain.anvil import start_anvil
from devchain.devnet import (
    DEMO_LATS,
    MULTICALL3_ADDRESS,
    devnet_genesis,
    load_artifacts,
    manifest_tokens,
)

pytestmark = pytest.mark.chain


def test_lat_devnet_without_then_with_multicall3(tmp_path, settings, monkeypatch) -> None:
    monkeypatch.setenv("RPC_URL", "")  # the command sets both; restored after the test
    monkeypatch.delenv("ETH_USD_FEED_31337", raising=False)  # as is its demo feed
    settings.RPC_URL = ""
    # The command reuses a node on its port (started on the devnet's first day, as the command
    # starts a new one) and leaves it running.
    node = start_anvil(timestamp=devnet_genesis())
    try:
        w3 = Web3(Web3.HTTPProvider(node.url))
        args = ["--port", str(node.port), "--dir", str(tmp_path)]
        call_command("lat_devnet", *args, "--no-multicall", stdout=io.StringIO())
        manifests = sorted((tmp_path / "manifests").glob("*.json"))
        assert [p.stem for p in manifests] == sorted(spec.symbol for spec in DEMO_LATS)
        proxies = [json.loads(p.read_text())["proxyAddress"] for p in manifests]
        assert all(w3.eth.get_code(proxy) for proxy in proxies)
        assert w3.eth.get_code(MULTICALL3_ADDRESS) == b""

        out = io.StringIO()
        call_command("lat_devnet", *args, stdout=out)  # the kept chain gains Multicall3
        assert "deploying" not in out.getvalue()
        assert [json.loads(p.read_text())["proxyAddress"] for p in manifests] == proxies
        runtime = load_artifacts()["Multicall3"]["deployedBytecode"].removeprefix("0x")
        assert w3.eth.get_code(MULTICALL3_ADDRESS) == bytes.fromhex(runtime)

        call_command("lat_devnet", *args, "--no-multicall", stdout=io.StringIO())
        assert w3.eth.get_code(MULTICALL3_ADDRESS) == b""  # and loses it again

        # --deposit: mint, approve and deposit 2.5 of the LAT's first token from wallet 12,
        # leaving the chain's Multicall3 as it is.
        lat = json.loads((tmp_path / "manifests" / "latETH.json").read_text())
        assert lat["tokens"] == {str(i): t for i, t in enumerate(manifest_tokens(lat))}
        assert {"roles", "proxyAdminAddress", "deploymentTimestamp"} <= set(lat)  # as published
        token = w3.eth.contract(
            address=lat["tokens"]["0"]["address"], abi=load_artifacts()["TestERC20"]["abi"]
        )
        wallet = w3.eth.accounts[12]
        held = token.functions.balanceOf(lat["proxyAddress"]).call()
        out = io.StringIO()
        call_command("lat_devnet", *args, "--deposit", "latETH", "--amount", "2.5", stdout=out)
        amount = 25 * 10 ** token.functions.decimals().call() // 10
        assert token.functions.balanceOf(lat["proxyAddress"]).call() == held + amount
        logs = w3.eth.get_logs(
            {"address": lat["proxyAddress"], "fromBlock": "latest", "toBlock": "latest"}
        )
        assert any(log["topics"][1][-20:] == bytes.fromhex(wallet[2:]) for log in logs)
        assert "deposited 2.5" in out.getvalue()
        assert w3.eth.get_code(MULTICALL3_ADDRESS) == b""
    finally:
        node.stop()


def test_lat_devnet_refuses_a_kept_chain_with_other_contracts(tmp_path, settings, monkeypatch):
    """A chain kept from a release whose LAT contracts differ is not served as if current."""
    from django.core.management.base import CommandError

    monkeypatch.setenv("RPC_URL", "")
    monkeypatch.delenv("ETH_USD_FEED_31337", raising=False)
    settings.RPC_URL = ""
    node = start_anvil(timestamp=devnet_genesis())
    try:
        w3 = Web3(Web3.HTTPProvider(node.url))
        args = ["--port", str(node.port), "--dir", str(tmp_path)]
        call_command("lat_devnet", *args, stdout=io.StringIO())
        lat = json.loads((tmp_path / "manifests" / "latBTC.json").read_text())
        older = load_artifacts()["TestERC20"]["deployedBytecode"]  # any other code
        w3.provider.make_request("anvil_setCode", [lat["implementationAddress"], older])
        with pytest.raises(CommandError, match="deployed with other LAT contracts"):
            call_command("lat_devnet", *args, stdout=io.StringIO())
        current = load_artifacts()["LiquidToken"]["deployedBytecode"]
        w3.provider.make_request("anvil_setCode", [lat["implementationAddress"], current])
        call_command("lat_devnet", *args, stdout=io.StringIO())  # as deployed: accepted

        # A chain of an older devnet, whose latETH AVS was account 7 itself.
        path = tmp_path / "manifests" / "latETH.json"
        path.write_text(
            json.dumps({**json.loads(path.read_text()), "avsAddress": w3.eth.accounts[7]})
        )
        with pytest.raises(CommandError, match="latETH's AVS not a ServiceManager"):
            call_command("lat_devnet", *args, stdout=io.StringIO())
    finally:
        node.stop()
