"""simulate-deposit under a slow or dead node: a total deadline, a bound on simulations in
flight, a stricter rate limit of its own.

The dead node is real: an anvil of the test's own, loaded with the devnet's state and frozen
with SIGSTOP, so that the kernel still accepts its TCP connections and nothing ever answers.
Only a node trickling bytes (which a real node cannot be made to do) is a small fake server.
Expected values (shares, gas) are asked of the chain with plain web3.
"""

from __future__ import annotations

import os
import signal
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import requests
from django.core.management import call_command

from deposits import restaking
from devchain.anvil import rpc_chain_id, start_anvil
from devchain.devnet import connect, contract, write_manifests
from tests.trickling import TricklingServer

pytestmark = pytest.mark.chain

WALLET_INDEX = 11
WAD = 10**18
TIMED_OUT = (
    "The chain node did not answer in time: the simulation was given up after {seconds} s. "
    "Nothing was simulated; try again later."
)


class FrozenNode:
    """An anvil of its own, loaded with the devnet's state, that the test can freeze (SIGSTOP:
    connections are still accepted, nothing answers) and thaw (SIGCONT)."""

    def __init__(self, dump: str) -> None:
        self.node = start_anvil()
        assert self.node.process is not None  # ours, not a reused one: ours to signal
        self.url = self.node.url
        self.w3 = connect(self.url)
        assert self.w3.provider.make_request("anvil_loadState", [dump]).get("result") is True
        self.frozen = False

    def freeze(self) -> None:
        pid = self.node.process.pid
        os.kill(pid, signal.SIGSTOP)
        self.frozen = True
        # The stop reaches each of anvil's threads asynchronously: wait until all are stopped.
        wait_until(lambda: all(state == "T" for state in _thread_states(pid)), timeout=5)
        assert rpc_chain_id(self.url, timeout=0.3) is None  # it accepts, but never answers

    def thaw(self) -> None:
        if self.frozen:
            os.kill(self.node.process.pid, signal.SIGCONT)
            self.frozen = False

    def stop(self) -> None:
        self.thaw()  # a stopped process would not see the SIGINT that ends it
        self.node.stop()


def _thread_states(pid: int) -> list[str]:
    """The state letter of each thread of a Linux process ("T": stopped)."""
    states = []
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/stat") as stat:
            states.append(stat.read().rsplit(")", 1)[1].split()[0])
    return states


def wait_until(predicate: Callable[[], bool], *, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.01)


@pytest.fixture(autouse=True)
def _simulate_rate_limit(settings) -> None:
    """Out of the way unless a test sets its own."""
    settings.RATE_LIMIT_SIMULATE = "1000000/min"


@pytest.fixture
def spare(chain) -> Iterator[FrozenNode]:
    node = FrozenNode(chain.rpc("anvil_dumpState"))
    try:
        yield node
    finally:
        node.stop()
        # Simulations still blocked on it end with its socket; none is left for the next test.
        wait_until(lambda: restaking.node_calls.busy == 0)


@pytest.fixture
def lat_eth(chain, settings, tmp_path) -> dict[str, Any]:
    """latETH imported and synced from the devnet."""
    settings.RPC_URL = chain.url
    manifest = chain.lat("latETH")
    call_command("lat_import", *map(str, write_manifests([manifest], tmp_path)))
    call_command("lat_sync", "--lat", manifest["proxyAddress"], "--no-progress")
    return manifest


def funded_body(w3, manifest: dict[str, Any], amount: int) -> dict[str, Any]:
    """A wallet that holds and has approved `amount` of the LAT's first token on `w3`'s chain;
    the simulate-deposit body of that deposit."""
    proxy = manifest["proxyAddress"]
    asset = manifest["tokens"][0]["address"]
    wallet = w3.eth.accounts[WALLET_INDEX]
    token = contract(w3, "TestERC20", asset)
    for call in (token.functions.mint(wallet, amount), token.functions.approve(proxy, amount)):
        receipt = w3.eth.wait_for_transaction_receipt(call.transact({"from": wallet}), timeout=30)
        assert receipt["status"] == 1
    return {"assets": [asset], "amounts": [str(amount)], "receiver": wallet, "sender": wallet}


def expected_success(w3, manifest: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
    """The answer for a one-asset deposit, from calculateShares and eth_estimateGas."""
    lt = contract(w3, "LiquidToken", manifest["proxyAddress"])
    asset, amount, wallet = body["assets"][0], int(body["amounts"][0]), body["sender"]
    shares = lt.functions.calculateShares(asset, amount).call()
    gas = lt.functions.deposit([asset], [amount], wallet).estimate_gas({"from": wallet})
    price = w3.eth.gas_price
    return {
        "success": True,
        "amounts": [shares / WAD],
        "fees": {
            "gas": {"gasLimit": str(gas), "gasPrice": str(price), "gasFee": str(gas * price)},
            "service": {"managementFee": 0.0, "performanceFee": 0.0},
        },
        "pricesStale": False,
    }


def assert_timed_out(response, seconds: str) -> None:
    assert response.status_code == 500, response.content
    assert response.json() == {
        "error": {
            "code": "internal_server_error",
            "message": TIMED_OUT.format(seconds=seconds),
            "doc_url": "/docs/errors#internal_server_error",
        }
    }


# --- the total deadline --------------------------------------------------------------------------


@pytest.mark.django_db
def test_frozen_node_is_a_500_within_the_deadline_then_recovers(api, lat_eth, spare, settings):
    body = funded_body(spare.w3, lat_eth, 3 * WAD)
    expected = expected_success(spare.w3, lat_eth, body)
    settings.RPC_URL = spare.url
    settings.SIMULATE_TIMEOUT = 1
    path = f"/lat/{lat_eth['proxyAddress']}/simulate-deposit"

    spare.freeze()
    started = time.monotonic()
    response = api.post(path, body, format="json")
    elapsed = time.monotonic() - started
    assert_timed_out(response, "1")
    assert 1 <= elapsed < 2  # SIMULATE_TIMEOUT + 1 s
    assert spare.url.rsplit(":", 1)[1] not in response.content.decode()

    spare.thaw()
    wait_until(lambda: restaking.node_calls.busy == 0)
    response = api.post(path, body, format="json")
    assert response.status_code == 200, response.content
    assert response.json() == expected


def trickling_node() -> TricklingServer:
    """Answers 200 with a long Content-Length, then one byte every 0.2 s for 3 s: every socket
    read succeeds well within any per-socket timeout, but the answer never completes in time."""
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
    return TricklingServer(head + b" " * 15, at_once=len(head), interval=0.2)


def test_node_trickling_bytes_is_cut_at_the_total_deadline(api, dataset, settings):
    """A per-socket timeout never fires here; the total deadline does."""
    node = trickling_node()
    try:
        settings.RPC_URL = node.url
        settings.SIMULATE_TIMEOUT = 1
        body = {
            "assets": [dataset.steth.address],
            "amounts": ["1000"],
            "receiver": "0x71bE63f3384f5fb98995898A86B02Fb2426c5788",
            "sender": "0x71bE63f3384f5fb98995898A86B02Fb2426c5788",
        }
        started = time.monotonic()
        path = f"/lat/{dataset.eth_lat.proxy_address}/simulate-deposit"
        response = api.post(path, body, format="json")
        elapsed = time.monotonic() - started
        assert_timed_out(response, "1")
        assert 1 <= elapsed < 2
    finally:
        node.stop()
        wait_until(lambda: restaking.node_calls.busy == 0)


# --- the bound on simulations in flight ------------------------------------------------------


def _post_in_thread(url: str, body: dict, out: list) -> threading.Thread:
    def run() -> None:
        started = time.monotonic()
        response = requests.post(url, json=body, timeout=30)
        out.append((response, time.monotonic() - started))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def _assert_answers_quickly(method: str, url: str, status: int, **kwargs) -> requests.Response:
    started = time.monotonic()
    response = requests.request(method, url, timeout=10, **kwargs)
    assert response.status_code == status, response.text
    assert time.monotonic() - started < 1  # far below the 4 s the simulations wait
    return response


@pytest.mark.django_db(transaction=True)  # the live server's threads read committed data
def test_simulations_hanging_on_a_frozen_node_are_bounded(live_server, lat_eth, spare, settings):
    body = funded_body(spare.w3, lat_eth, 2 * WAD)
    expected = expected_success(spare.w3, lat_eth, body)
    settings.RPC_URL = spare.url
    settings.SIMULATE_TIMEOUT = 4  # room for a loaded test machine to start all three
    settings.SIMULATE_MAX_IN_FLIGHT = 3
    proxy = lat_eth["proxyAddress"]
    url = f"{live_server.url}/lat/{proxy}/simulate-deposit"

    spare.freeze()
    hanging: list = []
    threads = [_post_in_thread(url, body, hanging) for _ in range(3)]
    wait_until(lambda: restaking.node_calls.busy == 3, timeout=3)

    refused = _assert_answers_quickly("POST", url, 429, json=body)
    assert refused.headers["Retry-After"] == "4"
    error = refused.json()["error"]
    assert error["code"] == "rate_limit_exceeded"
    assert error["doc_url"] == "/docs/errors#rate_limit_exceeded"
    assert error["message"] == (
        "Too many simulations are waiting on the chain node right now; nothing was simulated. "
        "Retry after 4 s."
    )
    # The read endpoints (and building, which calls no node) are not held up.
    _assert_answers_quickly("GET", f"{live_server.url}/lat/{proxy}", 200)
    _assert_answers_quickly("GET", f"{live_server.url}/lat", 200)
    deposit = {k: v for k, v in body.items() if k != "sender"}
    _assert_answers_quickly("POST", f"{live_server.url}/lat/{proxy}/deposit", 200, json=deposit)

    for thread in threads:
        thread.join(10)
    assert len(hanging) == 3
    for response, elapsed in hanging:
        assert_timed_out(response, "4")
        assert 4 <= elapsed < 5  # SIMULATE_TIMEOUT + 1 s

    spare.thaw()
    wait_until(lambda: restaking.node_calls.busy == 0)
    response = requests.post(url, json=body, timeout=30)
    assert response.status_code == 200, response.text
    assert response.json() == expected


# --- the rate limit of its own -------------------------------------------------------------------


def _client_ip() -> str:
    """A client address of the test's own, so that counters never meet across tests."""
    n = uuid.uuid4().int
    return f"10.{n % 250}.{(n >> 8) % 250}.{(n >> 16) % 250}"


@pytest.mark.django_db
def test_simulate_rate_limit_is_stricter_and_its_own(api, chain, lat_eth, settings, minute_window):
    settings.RATE_LIMIT_SIMULATE = "2/min"
    body = funded_body(chain.w3, lat_eth, WAD)
    expected = expected_success(chain.w3, lat_eth, body)
    proxy = lat_eth["proxyAddress"]
    path = f"/lat/{proxy}/simulate-deposit"
    ip = _client_ip()

    for _ in range(2):
        response = api.post(path, body, format="json", REMOTE_ADDR=ip)
        assert response.status_code == 200, response.content
        assert response.json() == expected
    response = api.post(path, body, format="json", REMOTE_ADDR=ip)
    assert response.status_code == 429
    assert response.json()["error"]["code"] == "rate_limit_exceeded"
    assert 1 <= int(response["Retry-After"]) <= 60

    # Reads and building are not counted against it, nor another client's simulations.
    assert api.get("/lat", REMOTE_ADDR=ip).status_code == 200
    assert api.get(f"/lat/{proxy}", REMOTE_ADDR=ip).status_code == 200
    assert api.get(f"/lat/{proxy}/fees", REMOTE_ADDR=ip).status_code == 200
    deposit = {k: v for k, v in body.items() if k != "sender"}
    assert (
        api.post(f"/lat/{proxy}/deposit", deposit, format="json", REMOTE_ADDR=ip).status_code == 200
    )
    other = api.post(path, body, format="json", REMOTE_ADDR=_client_ip())
    assert other.status_code == 200, other.content
