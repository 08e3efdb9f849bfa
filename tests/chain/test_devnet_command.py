"""python manage.py lat_devnet, with and without Multicall3, on an anvil of the test's own."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command
from web3 import Web3

from devchain.anvil import start_anvil
from devchain.devnet import DEMO_LATS, MULTICALL3_ADDRESS, load_artifacts

pytestmark = pytest.mark.chain


def test_lat_devnet_without_then_with_multicall3(tmp_path, settings, monkeypatch) -> None:
    monkeypatch.setenv("RPC_URL", "")  # the command sets both; restored after the test
    settings.RPC_URL = ""
    node = start_anvil()  # the command reuses a node on its port and leaves it running
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
    finally:
        node.stop()
