"""Direct Restaking on anvil: a wallet asks the service for a deposit transaction, signs and sends
exactly what it got, and the chain mints what simulate-deposit predicted just before.

Expected values come from the chain itself (receipts, events, balances, eth_gasPrice,
calculateShares, eth_call, eth_estimateGas), read with web3 in the test. simulate-deposit
answers its members at the top level (no `data` wrapper); deposit keeps its `data` wrapper. The
node is reached through a small recording proxy, so the tests also see how many JSON-RPC
requests each endpoint makes: none to build, one batch to simulate.
"""

from __future__ import annotations

import functools
import json
import threading
import time
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jsonschema
import pytest
from django.core.management import call_command
from drf_spectacular.generators import SchemaGenerator
from web3.logs import DISCARD

from devchain.devnet import DEPLOYER, write_manifests
from lats.models import FeeStructure, Lat, LatToken
from tests import factories as f
from tests.ports import closed_port_url

pytestmark = [pytest.mark.django_db(transaction=False), pytest.mark.chain]

WALLET_INDEX = 11  # a free anvil account (10 is the bench sender)
RECEIVER_INDEX = 12
WAD = 10**18


# --- a node in front of the node --------------------------------------------------------------


class _Server:
    """A ThreadingHTTPServer on 127.0.0.1 that records each request body; `answer(body)`
    returns the bytes to send back, or None to never answer (until the server stops)."""

    def __init__(self, answer) -> None:
        self.bodies: list[Any] = []
        self.stopping = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                server.bodies.append(json.loads(raw))
                reply = answer(raw)
                if reply is None:
                    server.stopping.wait(30)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.stopping.set()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture(autouse=True)
def _simulate_rate_limit_out_of_the_way(settings) -> None:
    """tests/e2e/test_simulate_faults.py tests RATE_LIMIT_SIMULATE; here it must not interfere."""
    settings.RATE_LIMIT_SIMULATE = "1000000/min"


@pytest.fixture
def recording_node(chain) -> Iterator[_Server]:
    """Forwards every request to anvil and records it."""

    def forward(raw: bytes) -> bytes:
        request = urllib.request.Request(
            chain.url, data=raw, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.read()

    server = _Server(forward)
    yield server
    server.stop()


@pytest.fixture
def silent_node() -> Iterator[_Server]:
    """Accepts the connection, reads the request, never answers."""
    server = _Server(lambda raw: None)
    yield server
    server.stop()


# --- the LAT in the service's database ----------------------------------------------------------


@pytest.fixture
def lat_eth(chain, settings, tmp_path, recording_node) -> dict[str, Any]:
    """latETH imported and synced (through anvil directly); the service's node is then the
    recording proxy, its log emptied."""
    settings.RPC_URL = chain.url
    manifest = chain.lat("latETH")
    call_command("lat_import", *map(str, write_manifests([manifest], tmp_path)))
    call_command("lat_sync", "--lat", manifest["proxyAddress"], "--no-progress")
    settings.RPC_URL = recording_node.url
    recording_node.bodies.clear()
    return manifest


def post(api, path: str, payload: dict):
    return api.post(path, payload, format="json")


def fund(chain, wallet: str, lat: str, assets: list[str], amounts: list[int], *, approve=True):
    for asset, amount in zip(assets, amounts, strict=True):
        token = chain.contract("TestERC20", asset)
        _wait(chain, token.functions.mint(wallet, amount).transact({"from": wallet}))
        if approve:
            _wait(chain, token.functions.approve(lat, amount).transact({"from": wallet}))


def _wait(chain, tx_hash):
    receipt = chain.w3.eth.wait_for_transaction_receipt(tx_hash, timeout=30, poll_latency=0.01)
    assert receipt["status"] == 1
    return receipt


def methods(bodies: list[Any]) -> list[list[str]]:
    """Each HTTP request's JSON-RPC methods (a batch is a list)."""
    return [[c["method"] for c in (b if isinstance(b, list) else [b])] for b in bodies]


# --- the round trip -----------------------------------------------------------------------------


def _expected_simulation(chain, deposit_call, wallet: str, service: dict) -> tuple[list[int], dict]:
    """What the chain says the deposit would mint and cost, asked with plain web3 (eth_call,
    eth_estimateGas, eth_gasPrice): the shares, and the answer simulate-deposit must give."""
    shares = deposit_call.call({"from": wallet})
    gas = deposit_call.estimate_gas({"from": wallet}, block_identifier="latest")
    price = chain.w3.eth.gas_price
    return shares, {
        "success": True,
        "amounts": [s / WAD for s in shares],
        "fees": {
            "gas": {"gasLimit": str(gas), "gasPrice": str(price), "gasFee": str(gas * price)},
            "service": service,
        },
    }


def _send_as_built(chain, wallet: str, data: dict, *, gas_limit: int):
    """Send exactly what the service built, with the gas limit it estimated."""
    tx = data["transaction"]
    return _wait(
        chain,
        chain.w3.eth.send_transaction(
            {
                "from": wallet,
                "to": tx["to"],
                "data": tx["data"],
                "value": int(tx["value"], 16),
                "chainId": int(data["chainId"]),
                "gas": gas_limit,
            }
        ),
    )


def test_wallet_signs_the_built_transaction_and_mints_what_was_simulated(
    api, chain, lat_eth, recording_node
):
    proxy = lat_eth["proxyAddress"]
    steth, cbeth = (t["address"] for t in lat_eth["tokens"])  # 18 and 6 decimals
    wallet, receiver = chain.account(WALLET_INDEX), chain.account(RECEIVER_INDEX)
    amounts = [3 * WAD + 123, 7_500_000]  # 3.000…123 stETH, 7.5 cbETH
    fund(chain, wallet, proxy, [steth, cbeth], amounts)
    FeeStructure.objects.create(
        lat=Lat.objects.get(proxy_address=proxy), management_fee="2.5", performance_fee="10"
    )
    lt = chain.contract("LiquidToken", proxy)
    supply_before = lt.functions.totalSupply().call()
    balance_before = lt.functions.balanceOf(receiver).call()
    payload = {
        "assets": [steth.lower(), cbeth],
        "amounts": [str(a) for a in amounts],
        "receiver": receiver.lower(),
    }

    expected_shares, expected = _expected_simulation(
        chain,
        lt.functions.deposit([steth, cbeth], amounts, receiver),
        wallet,
        {"managementFee": 2.5, "performanceFee": 10.0},  # the FeeStructure above
    )

    simulated = post(api, f"/lat/{proxy.lower()}/simulate-deposit", {**payload, "sender": wallet})
    assert simulated.status_code == 200, simulated.content
    assert methods(recording_node.bodies) == [["eth_call", "eth_estimateGas", "eth_gasPrice"]]
    prediction = simulated.json()
    assert prediction == expected
    gas = prediction["fees"]["gas"]

    recording_node.bodies.clear()
    built = post(api, f"/lat/{proxy}/deposit", payload)
    assert built.status_code == 200, built.content
    assert recording_node.bodies == []  # building calls no node
    data = built.json()["data"]
    assert data["chainId"] == str(chain.w3.eth.chain_id)
    assert data["functionName"] == "deposit"
    tx = data["transaction"]
    assert tx["to"] == proxy
    assert tx["value"] == "0x0"

    receipt = _send_as_built(chain, wallet, data, gas_limit=int(gas["gasLimit"]))
    assert receipt["gasUsed"] <= int(gas["gasLimit"])
    events = lt.events.AssetDeposited().process_receipt(receipt, errors=DISCARD)
    assert [
        (e["args"]["sender"], e["args"]["receiver"], e["args"]["asset"], e["args"]["amount"])
        for e in events
    ] == [(wallet, receiver, steth, amounts[0]), (wallet, receiver, cbeth, amounts[1])]
    minted = [e["args"]["shares"] for e in events]
    assert all(shares > 0 for shares in minted)
    assert minted == expected_shares  # the chain minted exactly what was simulated
    assert lt.functions.balanceOf(receiver).call() - balance_before == sum(minted)
    assert lt.functions.totalSupply().call() - supply_before == sum(minted)
    token = chain.contract("TestERC20", steth)
    assert token.functions.balanceOf(wallet).call() == 0


def _simulate(api, manifest, wallet, assets, amounts):
    response = post(
        api,
        f"/lat/{manifest['proxyAddress']}/simulate-deposit",
        {
            "assets": assets,
            "amounts": [str(a) for a in amounts],
            "receiver": wallet,
            "sender": wallet,
        },
    )
    assert response.status_code == 200, response.content
    answer = response.json()
    _simulation_schema().validate(answer)  # the body is built by hand: it must fit the schema
    return answer


@functools.cache
def _simulation_schema() -> jsonschema.protocols.Validator:
    """A validator of simulate-deposit's 200 body as the OpenAPI schema documents it, every
    property required that the schema lists as required, none other allowed."""
    schema = SchemaGenerator().get_schema(request=None, public=True)
    operation = schema["paths"]["/lat/{address}/simulate-deposit"]["post"]
    body = operation["responses"]["200"]["content"]["application/json"]["schema"]
    components = {
        name: {**component, "additionalProperties": False}
        for name, component in schema["components"]["schemas"].items()
    }
    return jsonschema.Draft7Validator({**body, "components": {"schemas": components}})


def _assert_reverted(chain, result: dict, reason: str) -> None:
    assert result == {
        "success": False,
        "amounts": [],
        "fees": {
            "gas": {"gasLimit": "0", "gasPrice": str(chain.w3.eth.gas_price), "gasFee": "0"},
            "service": {"managementFee": 0.0, "performanceFee": 0.0},
        },
        "reason": reason,
    }


def test_one_asset_simulation_is_calculate_shares_at_the_top_level(api, chain, lat_eth):
    """One entry mints exactly calculateShares(asset, amount) at the latest block."""
    proxy = lat_eth["proxyAddress"]
    steth = lat_eth["tokens"][0]["address"]
    wallet = chain.account(WALLET_INDEX)
    amount = 5 * WAD + 7
    fund(chain, wallet, proxy, [steth], [amount])
    lt = chain.contract("LiquidToken", proxy)
    shares = lt.functions.calculateShares(steth, amount).call()
    gas_limit = lt.functions.deposit([steth], [amount], wallet).estimate_gas({"from": wallet})
    gas_price = chain.w3.eth.gas_price
    assert shares > 0
    assert _simulate(api, lat_eth, wallet, [steth], [amount]) == {
        "success": True,
        "amounts": [shares / WAD],
        "fees": {
            "gas": {
                "gasLimit": str(gas_limit),
                "gasPrice": str(gas_price),
                "gasFee": str(gas_limit * gas_price),
            },
            "service": {"managementFee": 0.0, "performanceFee": 0.0},
        },
    }


def test_simulation_without_approval_reverts_with_the_allowance_error(
    api, chain, lat_eth, recording_node
):
    proxy = lat_eth["proxyAddress"]
    steth = lat_eth["tokens"][0]["address"]
    wallet = chain.account(WALLET_INDEX)
    fund(chain, wallet, proxy, [steth], [1000], approve=False)
    result = _simulate(api, lat_eth, wallet, [steth], [1000])
    # OpenZeppelin 5: ERC20InsufficientAllowance(spender, allowance, needed); the LAT spends.
    _assert_reverted(chain, result, f"ERC20InsufficientAllowance({proxy}, 0, 1000)")
    assert methods(recording_node.bodies) == [["eth_call", "eth_estimateGas", "eth_gasPrice"]]


def test_simulation_without_balance_reverts_with_the_balance_error(api, chain, lat_eth):
    proxy = lat_eth["proxyAddress"]
    cbeth = lat_eth["tokens"][1]["address"]
    wallet = chain.account(WALLET_INDEX)
    token = chain.contract("TestERC20", cbeth)
    _wait(chain, token.functions.approve(proxy, 5).transact({"from": wallet}))
    result = _simulate(api, lat_eth, wallet, [cbeth], [5])
    _assert_reverted(chain, result, f"ERC20InsufficientBalance({wallet}, 0, 5)")


def test_simulation_of_a_paused_lat_reverts_with_enforced_pause(api, chain, lat_eth):
    proxy = lat_eth["proxyAddress"]
    steth = lat_eth["tokens"][0]["address"]
    wallet = chain.account(WALLET_INDEX)
    fund(chain, wallet, proxy, [steth], [WAD])
    lt = chain.contract("LiquidToken", proxy)
    _wait(chain, lt.functions.pause().transact({"from": chain.account(DEPLOYER)}))
    result = _simulate(api, lat_eth, wallet, [steth], [WAD])
    _assert_reverted(chain, result, "EnforcedPause()")
    # Building still works: it does not look at the chain.
    built = post(
        api,
        f"/lat/{proxy}/deposit",
        {"assets": [steth], "amounts": [str(WAD)], "receiver": wallet},
    )
    assert built.status_code == 200


def test_asset_the_chain_no_longer_supports_reverts_unsupported_asset(api, chain, lat_eth):
    """The database (last refresh) still lists a token the contract does not support."""
    proxy = lat_eth["proxyAddress"]
    wbtc = chain.lat("latBTC")["tokens"][0]["address"]
    lat = Lat.objects.get(proxy_address=proxy)
    token = f.TokenFactory(address=wbtc, symbol="WBTC", decimals=8)
    LatToken.objects.create(lat=lat, token=token, strategy_address=f.address(0x9), decimals=8)
    wallet = chain.account(WALLET_INDEX)
    fund(chain, wallet, proxy, [wbtc], [10**8])
    result = _simulate(api, lat_eth, wallet, [wbtc], [10**8])
    _assert_reverted(chain, result, f"UnsupportedAsset({wbtc})")


# --- the node failing -------------------------------------------------------------------------


def _valid_body(chain, manifest) -> dict:
    wallet = chain.account(WALLET_INDEX)
    return {
        "assets": [manifest["tokens"][0]["address"]],
        "amounts": ["1000"],
        "receiver": wallet,
        "sender": wallet,
    }


def test_node_down_is_a_500_without_the_url(api, chain, lat_eth, settings, recording_node):
    url = closed_port_url()
    settings.RPC_URL = url
    path = f"/lat/{lat_eth['proxyAddress']}/simulate-deposit"
    response = post(api, path, _valid_body(chain, lat_eth))
    assert response.status_code == 500
    error = response.json()["error"]
    assert error["code"] == "internal_server_error"
    assert "could not be reached" in error["message"]
    text = response.content.decode()
    assert url not in text
    assert "127.0.0.1" not in text
    assert url.rsplit(":", 1)[1] not in text  # not even the port
    # Nothing else is affected: the node back, the same request simulates.
    settings.RPC_URL = recording_node.url
    assert post(api, path, _valid_body(chain, lat_eth)).status_code == 200
    assert api.get(f"/lat/{lat_eth['proxyAddress']}").status_code == 200


def test_node_timing_out_is_a_500_after_the_timeout(api, chain, lat_eth, settings, silent_node):
    settings.RPC_URL = silent_node.url
    settings.SIMULATE_TIMEOUT = 0.5
    started = time.monotonic()
    response = post(
        api, f"/lat/{lat_eth['proxyAddress']}/simulate-deposit", _valid_body(chain, lat_eth)
    )
    elapsed = time.monotonic() - started
    assert response.status_code == 500
    error = response.json()["error"]
    assert error["code"] == "internal_server_error"
    assert "did not answer in time" in error["message"]
    assert silent_node.url not in response.content.decode()
    assert 0.5 <= elapsed < 1.5
    # It asked once, one batch, and gave up (no retries); the server thread that records the
    # request may run late on a loaded machine.
    deadline = time.monotonic() + 5
    while not silent_node.bodies and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.6)  # past the deadline again: no second request follows
    assert methods(silent_node.bodies) == [["eth_call", "eth_estimateGas", "eth_gasPrice"]]
