"""Direct Restaking on anvil: a wallet asks the service for a deposit transaction, signs and sends
exactly what it got, and the chain mints what simulate-deposit predicted just before.

The devnet's LAT contracts behave as upstream's Mainnet v1 (OpenZeppelin 4.9: a paused LAT
reverts with the string "Pausable: paused"; a deposit while prices are stale refreshes every
price first). Expected values come from the chain itself (receipts, events, balances,
eth_gasPrice, eth_call, eth_estimateGas), read with web3 in the test, or are worked out by hand
(tests/devnet_values.py, revert data encoded here). simulate-deposit answers its members at the
top level (no `data` wrapper); deposit keeps its `data` wrapper. The node is reached through a
small recording proxy, so the tests also see how many JSON-RPC requests each endpoint makes:
none to build, one batch to simulate.
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
from eth_abi import encode as abi_encode
from web3 import Web3
from web3.logs import DISCARD

from devchain.devnet import DEPLOYER, write_manifests
from lats.models import FeeStructure, Lat, LatToken
from tests import factories as f
from tests.devnet_values import ETH_SUPPLY, ETH_TOTAL_ASSETS, eth_total_assets
from tests.ports import closed_port_url

pytestmark = [pytest.mark.django_db(transaction=False), pytest.mark.chain]

WALLET_INDEX = 11  # a free anvil account (10 is the bench sender)
RECEIVER_INDEX = 12
WAD = 10**18
# One simulation: the deposit, its gas, the gas price, and the oracle's arePricesStale().
SIMULATION_BATCH = [["eth_call", "eth_estimateGas", "eth_gasPrice", "eth_call"]]
STALE_NOTE = (
    "The LAT's prices are stale at this block: the deposit first refreshes every token's price "
    "from its source (amounts and the gas estimate include that refresh)."
)


def selector(signature: str) -> bytes:
    return bytes(Web3.keccak(text=signature)[:4])


def error_string_data(text: str) -> str:
    """Error(string) revert data, encoded by hand: selector, offset 32, length, padded bytes."""
    raw = text.encode()
    words = (32).to_bytes(32, "big") + len(raw).to_bytes(32, "big") + raw
    return "0x" + (selector("Error(string)") + words + bytes(-len(raw) % 32)).hex()


def custom_error_data(signature: str, types: list[str], values: list[Any]) -> str:
    return "0x" + (selector(signature) + abi_encode(types, values)).hex()


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
        "pricesStale": False,
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
    assert methods(recording_node.bodies) == SIMULATION_BATCH
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


def _assert_reverted(
    chain, result: dict, reason: str, code: str, revert: str, data: str, *, stale: bool = False
) -> None:
    expected = {
        "success": False,
        "amounts": [],
        "fees": {
            "gas": {"gasLimit": "0", "gasPrice": str(chain.w3.eth.gas_price), "gasFee": "0"},
            "service": {"managementFee": 0.0, "performanceFee": 0.0},
        },
        "pricesStale": stale,
        **({"note": STALE_NOTE} if stale else {}),
        "reason": reason,
        "reasonCode": code,
        "revert": revert,
        "revertData": data,
    }
    assert result == expected


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
        "pricesStale": False,
    }


def test_simulation_without_approval_reverts_with_the_allowance_error(
    api, chain, lat_eth, recording_node
):
    proxy = lat_eth["proxyAddress"]
    steth = lat_eth["tokens"][0]["address"]
    wallet = chain.account(WALLET_INDEX)
    fund(chain, wallet, proxy, [steth], [1000], approve=False)
    result = _simulate(api, lat_eth, wallet, [steth], [1000])
    # The devnet's token has OpenZeppelin 5's errors: ERC20InsufficientAllowance(spender,
    # allowance, needed), the LAT spending; the LAT's SafeERC20 passes it on unchanged.
    _assert_reverted(
        chain,
        result,
        "The sender has not approved the LAT to take this amount of the token: approve it first.",
        "insufficient_allowance",
        f"ERC20InsufficientAllowance({proxy}, 0, 1000)",
        custom_error_data(
            "ERC20InsufficientAllowance(address,uint256,uint256)",
            ["address", "uint256", "uint256"],
            [proxy, 0, 1000],
        ),
    )
    assert methods(recording_node.bodies) == SIMULATION_BATCH


def test_simulation_without_balance_reverts_with_the_balance_error(api, chain, lat_eth):
    proxy = lat_eth["proxyAddress"]
    cbeth = lat_eth["tokens"][1]["address"]
    wallet = chain.account(WALLET_INDEX)
    token = chain.contract("TestERC20", cbeth)
    _wait(chain, token.functions.approve(proxy, 5).transact({"from": wallet}))
    result = _simulate(api, lat_eth, wallet, [cbeth], [5])
    _assert_reverted(
        chain,
        result,
        "The sender's token balance is too low for this deposit.",
        "insufficient_balance",
        f"ERC20InsufficientBalance({wallet}, 0, 5)",
        custom_error_data(
            "ERC20InsufficientBalance(address,uint256,uint256)",
            ["address", "uint256", "uint256"],
            [wallet, 0, 5],
        ),
    )


def test_simulation_of_a_paused_lat_reverts_with_the_pausable_string(api, chain, lat_eth):
    proxy = lat_eth["proxyAddress"]
    steth = lat_eth["tokens"][0]["address"]
    wallet = chain.account(WALLET_INDEX)
    fund(chain, wallet, proxy, [steth], [WAD])
    lt = chain.contract("LiquidToken", proxy)
    _wait(chain, lt.functions.pause().transact({"from": chain.account(DEPLOYER)}))
    result = _simulate(api, lat_eth, wallet, [steth], [WAD])
    # OpenZeppelin 4.9's Pausable, as on Mainnet v1: Error("Pausable: paused").
    _assert_reverted(
        chain,
        result,
        "The LAT is paused: it accepts no deposits until it is unpaused.",
        "paused",
        "Pausable: paused",
        error_string_data("Pausable: paused"),
    )
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
    _assert_reverted(
        chain,
        result,
        f"{wbtc} is not a token this LAT accepts.",
        "unsupported_asset",
        f"UnsupportedAsset({wbtc})",
        custom_error_data("UnsupportedAsset(address)", ["address"], [wbtc]),
    )


# --- stale prices -------------------------------------------------------------------------------


def _rate_feed(chain, manifest: dict, token: str):
    """The Chainlink-style feed latETH's oracle reads the token's price from."""
    oracle = chain.contract(
        "TokenRegistryOracle",
        manifest["contractDeployments"]["proxy"]["tokenRegistryOracle"]["address"],
    )
    return oracle, chain.contract("PriceFeed", oracle.functions.tokenConfigs(token).call()[3])


def test_a_deposit_while_prices_are_stale_mints_what_was_simulated_after_the_refresh(
    api, chain, lat_eth, recording_node
):
    proxy = lat_eth["proxyAddress"]
    steth, cbeth = (t["address"] for t in lat_eth["tokens"])
    manager = lat_eth["contractDeployments"]["proxy"]["liquidTokenManager"]["address"]
    wallet = chain.account(WALLET_INDEX)
    amount = 2 * 10**6  # 2 cbETH
    fund(chain, wallet, proxy, [cbeth], [amount])
    lt = chain.contract("LiquidToken", proxy)
    fresh_gas = lt.functions.deposit([cbeth], [amount], wallet).estimate_gas({"from": wallet})
    # cbETH's price source moves from 1.09 to 1.10; a day later the oracle's prices are stale.
    oracle, feed = _rate_feed(chain, lat_eth, cbeth)
    _wait(chain, feed.functions.setAnswer(110 * 10**16).transact({"from": chain.account(0)}))
    chain.rpc("evm_increaseTime", 86_401)
    chain.rpc("evm_mine")

    # By hand: the deposit first takes cbETH at 1.10, so totalAssets grows with it.
    expected = (
        amount * 110 * 10**16 // 10**6 * ETH_SUPPLY // eth_total_assets(cbeth_price=110 * 10**16)
    )
    calculated = amount * 109 * 10**16 // 10**6 * ETH_SUPPLY // ETH_TOTAL_ASSETS  # stale price
    assert lt.functions.calculateShares(cbeth, amount).call() == calculated != expected

    recording_node.bodies.clear()
    result = _simulate(api, lat_eth, wallet, [cbeth], [amount])
    assert methods(recording_node.bodies) == SIMULATION_BATCH
    assert result["success"] is True
    assert result["amounts"] == [expected / WAD]
    assert (result["pricesStale"], result["note"]) == (True, STALE_NOTE)
    gas_limit = int(result["fees"]["gas"]["gasLimit"])
    assert gas_limit > fresh_gas  # the estimate includes the refresh

    receipt = _wait(
        chain,
        lt.functions.deposit([cbeth], [amount], wallet).transact(
            {"from": wallet, "gas": gas_limit}
        ),
    )
    block = receipt["blockNumber"]
    (deposited,) = lt.events.AssetDeposited().get_logs(from_block=block, to_block=block)
    assert deposited["args"]["shares"] == expected  # the chain minted what was simulated
    # The refresh's events, read with plain web3.
    (refreshed,) = lt.events.PricesUpdatedBeforeDeposit().get_logs(from_block=block, to_block=block)
    assert refreshed["args"]["depositor"] == wallet
    rates = oracle.events.TokenRateUpdated().get_logs(from_block=block, to_block=block)
    assert [(e["args"]["token"], e["args"]["oldRate"], e["args"]["newRate"]) for e in rates] == [
        (steth, 999 * 10**15, 999 * 10**15),
        (cbeth, 109 * 10**16, 110 * 10**16),
    ]
    assert {e["args"]["updater"] for e in rates} == {proxy}
    (updated,) = oracle.events.GlobalPricesUpdated().get_logs(from_block=block, to_block=block)
    assert updated["args"]["updater"] == proxy
    assert updated["args"]["timestamp"] == chain.w3.eth.get_block(block)["timestamp"]
    prices = chain.contract("LiquidTokenManager", manager).events.TokenPriceUpdated()
    assert [
        (e["args"]["token"], e["args"]["newPrice"], e["args"]["updater"])
        for e in prices.get_logs(from_block=block, to_block=block)
    ] == [(steth, 999 * 10**15, oracle.address), (cbeth, 110 * 10**16, oracle.address)]
    # Fresh again: the next simulation says so.
    assert _simulate(api, lat_eth, wallet, [cbeth], [1])["pricesStale"] is False


def test_a_failing_price_source_fails_a_stale_deposit_with_price_update_failed(api, chain, lat_eth):
    proxy = lat_eth["proxyAddress"]
    cbeth = lat_eth["tokens"][1]["address"]
    wallet = chain.account(WALLET_INDEX)
    fund(chain, wallet, proxy, [cbeth], [10**6])
    _, feed = _rate_feed(chain, lat_eth, cbeth)
    _wait(chain, feed.functions.setAnswer(0).transact({"from": chain.account(0)}))  # no price
    chain.rpc("evm_increaseTime", 86_401)
    chain.rpc("evm_mine")
    result = _simulate(api, lat_eth, wallet, [cbeth], [10**6])
    _assert_reverted(
        chain,
        result,
        "The LAT's prices are stale and refreshing them failed (a token's price source gave no "
        "price): it accepts no deposits until its prices are updated.",
        "price_refresh_failed",
        "PriceUpdateFailed()",
        "0x" + selector("PriceUpdateFailed()").hex(),
        stale=True,
    )


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
    assert methods(silent_node.bodies) == SIMULATION_BATCH
