"""POST /lat/{address}/deposit and /simulate-deposit: validation, and the calldata they build.

Against the hand-written data set of tests/conftest.py (eLAT supports stETH and USDx, nLAT
supports NAT). The expected calldata is encoded here with eth_abi and the selector computed
here with keccak, independently of the service's gateway. No node is needed: build never calls
one, and every invalid request is refused before simulate-deposit would call one.
"""

from __future__ import annotations

import io
import json
from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from eth_abi import encode as abi_encode
from eth_utils import keccak, to_checksum_address

from core.errors import MalformedRequest
from deposits.api.restaking import DepositBodyParser
from deposits.api.restaking_serializers import (
    DepositSimulationSerializer,
    deposit_simulation_data,
)
from deposits.restaking import DepositSimulation
from deposits.reverts import DepositFailure
from lats.models import Avs, FeeStructure, Lat, LatToken, Token
from tests import factories as f
from tests.ports import closed_port_url

pytestmark = pytest.mark.django_db

LAT = f.address(0x1001)  # eLAT
STETH = f.address(0x5E)
USDX = f.address(0x6D)
NAT = f.address(0x7A)  # supported by nLAT only
WALLET = "0x71bE63f3384f5fb98995898A86B02Fb2426c5788"
OTHER = "0xBcd4042DE499D14e55001CcbB24a551F3b954096"
ZERO = "0x0000000000000000000000000000000000000000"
SELECTOR = keccak(text="deposit(address[],uint256[],address)")[:4]
UINT256_MAX = 2**256 - 1


@pytest.fixture(autouse=True)
def _simulate_rate_limit_out_of_the_way(settings) -> None:
    """These tests post simulate-deposit far more than RATE_LIMIT_SIMULATE allows a minute;
    tests/e2e/test_simulate_faults.py tests that limit."""
    settings.RATE_LIMIT_SIMULATE = "1000000/min"


def body(**overrides) -> dict:
    out = {
        "assets": [STETH, USDX],
        "amounts": ["1000000000000000000", "2500000"],
        "receiver": WALLET,
    }
    out.update(overrides)
    return {k: v for k, v in out.items() if v is not ...}


def post(api, path: str, payload, *, content_type: str = "application/json", **extra):
    data = payload if isinstance(payload, str | bytes) else json.dumps(payload)
    return api.generic("POST", path, data, content_type=content_type, **extra)


def expected_calldata(assets: list[str], amounts: list[int], receiver: str) -> str:
    encoded = abi_encode(["address[]", "uint256[]", "address"], [assets, amounts, receiver])
    return "0x" + (SELECTOR + encoded).hex()


def assert_error(response, status: int, code: str, *fragments: str) -> dict:
    assert response.status_code == status, response.content
    error = response.json()["error"]
    assert error["code"] == code
    assert error["doc_url"].endswith(f"/errors#{code}")
    for fragment in fragments:
        assert fragment in error["message"], (fragment, error["message"])
    return error


# --- building --------------------------------------------------------------------------------


def test_build_returns_the_transaction(api, dataset, settings):
    settings.RPC_URL = ""  # no node at all: building must not need one
    response = post(api, f"/lat/{LAT.lower()}/deposit", body())
    assert response.status_code == 200, response.content
    assert response.json() == {
        "data": {
            "transaction": {
                "to": LAT,
                "data": expected_calldata([STETH, USDX], [10**18, 2_500_000], WALLET),
                "value": "0x0",
            },
            "chainId": "31337",
            "functionName": "deposit",
        }
    }


def test_build_calldata_layout_by_hand(api, dataset):
    """The ABI head/tail layout of deposit(address[],uint256[],address), word by word."""
    data = post(api, f"/lat/{LAT}/deposit", body(amounts=["7", "9"])).json()["data"]
    raw = bytes.fromhex(data["transaction"]["data"][2:])
    assert raw[:4] == SELECTOR
    words = [raw[4 + 32 * i : 4 + 32 * (i + 1)] for i in range((len(raw) - 4) // 32)]
    as_int = [int.from_bytes(w, "big") for w in words]
    assert as_int[0] == 0x60  # offset of assets: after three head words
    assert as_int[1] == 0x60 + 32 * 3  # offset of amounts: after assets' length + 2 items
    assert as_int[2] == int(WALLET, 16)  # receiver inline
    assert as_int[3:6] == [2, int(STETH, 16), int(USDX, 16)]
    assert as_int[6:9] == [2, 7, 9]
    assert len(words) == 9


def test_build_accepts_any_letter_case_and_answers_checksummed(api, dataset):
    payload = body(assets=[STETH.lower(), "0x" + USDX[2:].upper()], receiver=WALLET.lower())
    response = post(api, f"/lat/{'0x' + LAT[2:].upper()}/deposit", payload)
    assert response.status_code == 200, response.content
    tx = response.json()["data"]["transaction"]
    assert tx["to"] == LAT
    assert tx["data"] == expected_calldata([STETH, USDX], [10**18, 2_500_000], WALLET)


def test_build_allows_repeated_assets_and_the_largest_uint256(api, dataset):
    payload = body(
        assets=[STETH, STETH, USDX],
        amounts=["1", str(UINT256_MAX), "000042"],
        extra={"ignored": True},
        note="unknown members are ignored",
    )
    response = post(api, f"/lat/{LAT}/deposit", payload)
    assert response.status_code == 200, response.content
    assert response.json()["data"]["transaction"]["data"] == expected_calldata(
        [STETH, STETH, USDX], [1, UINT256_MAX, 42], WALLET
    )


def test_build_uses_the_lats_own_chain_id(api, dataset):
    Lat.objects.filter(proxy_address=LAT).update(chain_id=17000)
    response = post(api, f"/lat/{LAT}/deposit", body())
    assert response.json()["data"]["chainId"] == "17000"


# --- validation --------------------------------------------------------------------------------

# (case, body, status, code, message fragments)
INVALID_BODIES = [
    ("missing assets", body(assets=...), 422, "unprocessable_entity", ["assets is required"]),
    ("null assets", body(assets=None), 422, "unprocessable_entity", ["assets is required"]),
    (
        "assets not an array",
        body(assets=STETH),
        422,
        "unprocessable_entity",
        ["assets must be an array of token addresses, not a string"],
    ),
    ("empty assets", body(assets=[]), 422, "unprocessable_entity", ["assets must have at least 1"]),
    ("missing amounts", body(amounts=...), 422, "unprocessable_entity", ["amounts is required"]),
    (
        "empty amounts",
        body(amounts=[]),
        422,
        "unprocessable_entity",
        ["amounts must have at least 1 item"],
    ),
    (
        "unequal lengths",
        body(amounts=["1"]),
        422,
        "unprocessable_entity",
        ["assets and amounts must have the same length (2 assets, 1 amounts)"],
    ),
    (
        "amount as a JSON number",
        body(amounts=["1", 2500000]),
        422,
        "unprocessable_entity",
        ["amounts[1] must be a decimal integer string", "JSON number is refused"],
    ),
    (
        "amount as a float",
        body(amounts=[1.5, "1"]),
        422,
        "unprocessable_entity",
        ["amounts[0] must be a decimal integer string"],
    ),
    (
        "amount null",
        body(amounts=["1", None]),
        422,
        "unprocessable_entity",
        ["amounts[1] must be a decimal integer string, not null"],
    ),
    (
        "amount boolean",
        body(amounts=[True, "1"]),
        422,
        "unprocessable_entity",
        ["amounts[0] must be a decimal integer string, not a boolean"],
    ),
    (
        "amount zero",
        body(amounts=["1", "0"]),
        422,
        "unprocessable_entity",
        ["amounts[1] must be above zero"],
    ),
    (
        "amount zeros",
        body(amounts=["000", "1"]),
        422,
        "unprocessable_entity",
        ["amounts[0] must be above zero"],
    ),
    (
        "amount 2^256",
        body(amounts=["1", str(2**256)]),
        422,
        "unprocessable_entity",
        ["amounts[1] must be below 2^256"],
    ),
    (
        "amount far beyond 2^256",
        body(amounts=["9" * 5000, "1"]),
        422,
        "unprocessable_entity",
        ["amounts[0] must be below 2^256"],
    ),
    *[
        (
            f"amount {raw!r}",
            body(amounts=["1", raw]),
            422,
            "unprocessable_entity",
            ["amounts[1] must be a decimal integer string matching ^\\d+$"],
        )
        for raw in ["-1", "1.5", "1e18", " 1", "1 ", "0x10", "", "1\n", "\uff11", "\u0661"]
    ],
    (
        "asset malformed",
        body(assets=[STETH, "0x1234"]),
        422,
        "unprocessable_entity",
        ["assets[1] must be an address matching ^0x[a-fA-F0-9]{40}$"],
    ),
    (
        "asset with a trailing newline",
        body(assets=[STETH + "\n", USDX]),
        422,
        "unprocessable_entity",
        ["assets[0] must be an address"],
    ),
    (
        "asset not a string",
        body(assets=[STETH, 5]),
        422,
        "unprocessable_entity",
        ["assets[1] must be an address"],
    ),
    (
        "asset the LAT does not support",
        body(assets=[STETH, NAT.lower()]),
        422,
        "unprocessable_entity",
        [f"assets[1] ({NAT}) is not a token this LAT supports"],
    ),
    (
        "asset unknown to the service",
        body(assets=[OTHER, USDX]),
        422,
        "unprocessable_entity",
        [f"assets[0] ({OTHER}) is not a token this LAT supports"],
    ),
    ("missing receiver", body(receiver=...), 422, "unprocessable_entity", ["receiver is required"]),
    (
        "receiver malformed",
        body(receiver="0xZZ" + WALLET[4:]),
        422,
        "unprocessable_entity",
        ["receiver must be an address matching"],
    ),
    (
        "receiver zero",
        body(receiver=ZERO),
        422,
        "unprocessable_entity",
        ["receiver must not be the zero address"],
    ),
    (
        "every problem at once",
        {"assets": [STETH, "nope", NAT], "amounts": [1, "0"], "receiver": "x"},
        422,
        "unprocessable_entity",
        [
            "assets[1] must be an address",
            f"assets[2] ({NAT}) is not a token this LAT supports",
            "amounts[0] must be a decimal integer string",
            "amounts[1] must be above zero",
            "assets and amounts must have the same length (3 assets, 2 amounts)",
            "receiver must be an address",
        ],
    ),
]


def _write_counts() -> tuple[int, ...]:
    return tuple(m.objects.count() for m in (Lat, LatToken, Token, Avs, FeeStructure))


def _assert_nothing_written(captured) -> None:
    writes = [
        q["sql"]
        for q in captured.captured_queries
        if q["sql"].lstrip().upper().startswith(("INSERT", "UPDATE", "DELETE"))
    ]
    assert writes == []


@pytest.mark.parametrize("endpoint", ["deposit", "simulate-deposit"])
@pytest.mark.parametrize(
    ("payload", "status", "code", "fragments"),
    [case[1:] for case in INVALID_BODIES],
    ids=[case[0] for case in INVALID_BODIES],
)
def test_invalid_body(api, dataset, settings, endpoint, payload, status, code, fragments):
    # simulate-deposit must refuse before calling the node: a closed port would give a 500.
    settings.RPC_URL = closed_port_url()
    if endpoint == "simulate-deposit" and isinstance(payload, dict):
        payload = {**payload, "sender": WALLET}
    before = _write_counts()
    with CaptureQueriesContext(connection) as captured:
        response = post(api, f"/lat/{LAT}/{endpoint}", payload)
    assert_error(response, status, code, *fragments)
    _assert_nothing_written(captured)
    assert _write_counts() == before


# (case, raw body, content type, status, message fragment)
MALFORMED_REQUESTS = [
    ("not JSON", "{assets: [", "application/json", "not valid JSON"),
    ("NaN is not JSON", '{"assets": NaN}', "application/json", "not valid JSON"),
    ("not UTF-8", b'{"assets": "\xff"}', "application/json", "not valid JSON"),
    ("nested too deep", '{"a": ' + "[" * 33 + "]" * 33 + "}", "application/json", "deeper than 32"),
    ("deeper still", "[" * 16000 + "]" * 16000, "application/json", "larger than 16384"),
    ("a JSON array", json.dumps([body()]), "application/json", "must be a JSON object"),
    ("a JSON string", json.dumps("assets"), "application/json", "must be a JSON object"),
    ("JSON null", "null", "application/json", "must be a JSON object"),
    ("empty body", "", "application/json", "body is empty"),
    ("text/plain", json.dumps(body()), "text/plain", "Content-Type: application/json"),
    ("form encoded", "assets=1", "application/x-www-form-urlencoded", "application/json"),
    ("multipart", "x", "multipart/form-data; boundary=x", "application/json"),
    ("no content type", json.dumps(body()), "", "application/json"),
]


@pytest.mark.parametrize("endpoint", ["deposit", "simulate-deposit"])
@pytest.mark.parametrize(
    ("raw", "content_type", "fragment"),
    [case[1:] for case in MALFORMED_REQUESTS],
    ids=[case[0] for case in MALFORMED_REQUESTS],
)
def test_malformed_request_is_a_400(api, dataset, endpoint, raw, content_type, fragment):
    before = _write_counts()
    with CaptureQueriesContext(connection) as captured:
        response = post(api, f"/lat/{LAT}/{endpoint}", raw, content_type=content_type)
    assert_error(response, 400, "bad_request", fragment)
    _assert_nothing_written(captured)
    assert _write_counts() == before


def test_json_content_type_with_charset_is_accepted(api, dataset):
    response = post(
        api, f"/lat/{LAT}/deposit", body(), content_type="application/json; charset=utf-8"
    )
    assert response.status_code == 200, response.content


def test_body_over_the_limit_is_a_400(api, dataset, settings):
    settings.DEPOSIT_BODY_MAX_BYTES = 300
    payload = json.dumps(body())
    padded = payload[:-1] + ', "pad": "' + "x" * (300 - len(payload) - 11) + '"}'
    assert len(padded.encode()) == 300
    assert post(api, f"/lat/{LAT}/deposit", padded).status_code == 200  # exactly at the limit
    over = padded[:-2] + 'x"}'
    assert len(over.encode()) == 301
    assert_error(post(api, f"/lat/{LAT}/deposit", over), 400, "bad_request", "larger than 300")


def test_declared_content_length_over_the_limit_is_refused_before_reading(api, dataset, settings):
    settings.DEPOSIT_BODY_MAX_BYTES = 1000
    response = post(api, f"/lat/{LAT}/deposit", json.dumps(body()), CONTENT_LENGTH="5000")
    assert_error(response, 400, "bad_request", "larger than 1000 bytes")


def test_default_limit_refuses_a_large_body(api, dataset):
    huge = body(assets=[STETH] * 1000, amounts=["1"] * 1000)
    assert len(json.dumps(huge)) > 16 * 1024
    assert_error(post(api, f"/lat/{LAT}/deposit", huge), 400, "bad_request", "larger than 16384")


class _Request:
    META: dict = {}


def test_parser_counts_the_bytes_it_reads_not_only_the_declared_length(settings):
    """A body without Content-Length (or one that lies) is still capped by what is read."""
    settings.DEPOSIT_BODY_MAX_BYTES = 10
    parser = DepositBodyParser()
    stream = io.BytesIO(b'{"a": "' + b"x" * 100 + b'"}')
    with pytest.raises(MalformedRequest):
        parser.parse(stream, "application/json", {"request": _Request()})
    assert parser.parse(io.BytesIO(b'{"a": 1}'), "application/json", {"request": _Request()}) == {
        "a": 1
    }


@pytest.mark.parametrize("endpoint", ["deposit", "simulate-deposit"])
@pytest.mark.parametrize(
    "address", ["0x1234", "0x" + "g" * 40, LAT + "0", "lat", LAT + "%0A", "0X" + LAT[2:]]
)
def test_malformed_path_address_is_a_422(api, dataset, endpoint, address):
    response = post(api, f"/lat/{address}/{endpoint}", body(sender=WALLET))
    assert_error(response, 422, "unprocessable_entity", "address must be an address matching ^0x")


@pytest.mark.parametrize("endpoint", ["deposit", "simulate-deposit"])
def test_unknown_lat_is_a_404(api, dataset, endpoint):
    response = post(api, f"/lat/{OTHER.lower()}/{endpoint}", body(sender=WALLET))
    assert_error(response, 404, "not_found", f"No LAT at {OTHER}")


@pytest.mark.parametrize("endpoint", ["deposit", "simulate-deposit"])
@pytest.mark.parametrize("method", ["get", "put", "patch", "delete"])
def test_other_methods_are_a_405(api, dataset, endpoint, method):
    response = getattr(api, method)(f"/lat/{LAT}/{endpoint}")
    assert response.status_code == 405
    assert response.json()["error"]["code"] == "bad_request"


def test_simulate_requires_a_sender(api, dataset, settings):
    settings.RPC_URL = closed_port_url()
    response = post(api, f"/lat/{LAT}/simulate-deposit", body())
    assert_error(response, 422, "unprocessable_entity", "sender is required")
    response = post(api, f"/lat/{LAT}/simulate-deposit", body(sender="0x12"))
    assert_error(response, 422, "unprocessable_entity", "sender must be an address matching")


def test_build_ignores_sender(api, dataset):
    response = post(api, f"/lat/{LAT}/deposit", body(sender="not an address"))
    assert response.status_code == 200, response.content


def test_simulate_without_a_configured_node_is_a_500_that_says_so(api, dataset, settings):
    settings.RPC_URL = ""
    settings.RPC_URLS = {}
    response = post(api, f"/lat/{LAT}/simulate-deposit", body(sender=WALLET))
    assert_error(response, 500, "internal_server_error", "no chain node for chain 31337")


def test_simulate_with_the_node_down_is_a_500_without_the_url(api, dataset, settings, caplog):
    url = closed_port_url()
    settings.RPC_URL = url
    response = post(api, f"/lat/{LAT}/simulate-deposit", body(sender=WALLET))
    error = assert_error(response, 500, "internal_server_error", "could not be reached")
    assert "127.0.0.1" not in response.content.decode()
    assert url not in error["message"]
    assert any("node unavailable" in r.getMessage() for r in caplog.records)
    assert all(url not in r.getMessage() for r in caplog.records)
    # Nothing else is affected.
    assert post(api, f"/lat/{LAT}/deposit", body()).status_code == 200
    assert api.get(f"/lat/{LAT}").status_code == 200


def test_checksum_of_the_constants():
    for address in (LAT, STETH, USDX, NAT, WALLET, OTHER):
        assert to_checksum_address(address) == address


@pytest.mark.parametrize("endpoint", ["deposit", "simulate-deposit"])
def test_one_database_query_per_request(
    api, dataset, settings, endpoint, django_assert_num_queries
):
    """The LAT, its tokens and its fees in one read; nothing else touches the database."""
    settings.RPC_URL = closed_port_url()
    with django_assert_num_queries(1):
        response = post(api, f"/lat/{LAT}/{endpoint}", body(sender=WALLET))
    assert response.status_code == (200 if endpoint == "deposit" else 500)


def test_a_lat_without_tokens_supports_no_asset(api, dataset):
    LatToken.objects.filter(lat__proxy_address=LAT).delete()
    response = post(api, f"/lat/{LAT}/deposit", body())
    assert_error(
        response,
        422,
        "unprocessable_entity",
        f"assets[0] ({STETH}) is not a token this LAT supports",
        f"assets[1] ({USDX}) is not a token this LAT supports",
    )


def test_each_lat_checks_its_own_tokens(api, dataset):
    native = f.address(0x1002)
    ok = post(api, f"/lat/{native}/deposit", body(assets=[NAT], amounts=["5"]))
    assert ok.status_code == 200, ok.content
    assert ok.json()["data"]["transaction"]["to"] == native
    refused = post(api, f"/lat/{native}/deposit", body(assets=[STETH], amounts=["5"]))
    assert_error(refused, 422, "unprocessable_entity", f"assets[0] ({STETH}) is not a token")


def test_nesting_guard_counts_levels_not_brackets_and_skips_strings(api, dataset):
    """32 levels pass; brackets inside strings and side by side are not nesting."""
    deep_ok = "[" * 31 + "]" * 31
    payload = json.dumps(body())[:-1] + f', "x": {deep_ok}, "y": "' + "[{" * 100 + '"}'
    payload = payload[:-1] + ', "z": [' + ",".join(["[]"] * 100) + "]}"
    assert post(api, f"/lat/{LAT}/deposit", payload).status_code == 200


def test_parser_refuses_deep_nesting_before_json_sees_it(settings):
    settings.DEPOSIT_BODY_MAX_BYTES = 10**6
    raw = b"[" * 200_000 + b"]" * 200_000  # would overflow the C stack inside json
    with pytest.raises(MalformedRequest):
        DepositBodyParser().parse(io.BytesIO(raw), "application/json", {"request": _Request()})


# --- the cap on entries ----------------------------------------------------------------------


@pytest.mark.parametrize("endpoint", ["deposit", "simulate-deposit"])
def test_more_assets_than_the_cap_is_a_422_naming_the_field(api, dataset, settings, endpoint):
    settings.RPC_URL = closed_port_url()  # refused before any node is called
    assert settings.DEPOSIT_MAX_ASSETS == 32
    payload = body(assets=[STETH] * 33, amounts=["1"] * 33, sender=WALLET)
    response = post(api, f"/lat/{LAT}/{endpoint}", payload)
    error = assert_error(response, 422, "unprocessable_entity")
    assert (
        error["message"]
        == "assets must have at most 32 items.; amounts must have at most 32 items."
    )
    only_assets = body(assets=[USDX] * 33, amounts=["1"] * 32, sender=WALLET)
    error = assert_error(
        post(api, f"/lat/{LAT}/{endpoint}", only_assets), 422, "unprocessable_entity"
    )
    assert error["message"] == (
        "assets must have at most 32 items.; "
        "assets and amounts must have the same length (33 assets, 32 amounts)."
    )


def test_exactly_the_cap_is_built(api, dataset):
    response = post(api, f"/lat/{LAT}/deposit", body(assets=[STETH] * 32, amounts=["3"] * 32))
    assert response.status_code == 200, response.content
    assert response.json()["data"]["transaction"]["data"] == expected_calldata(
        [STETH] * 32, [3] * 32, WALLET
    )


def test_the_cap_is_read_per_request(api, dataset, settings):
    settings.DEPOSIT_MAX_ASSETS = 2
    response = post(api, f"/lat/{LAT}/deposit", body(assets=[STETH] * 3, amounts=["1"] * 3))
    assert_error(response, 422, "unprocessable_entity", "assets must have at most 2 items")
    assert post(api, f"/lat/{LAT}/deposit", body()).status_code == 200


# --- the documented shapes ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def openapi() -> dict:
    from drf_spectacular.generators import SchemaGenerator

    return SchemaGenerator().get_schema(request=None, public=True)


def _resolve(schema: dict, node: dict) -> dict:
    ref = node.get("$ref")
    return schema["components"]["schemas"][ref.rsplit("/", 1)[1]] if ref else node


def test_schema_simulate_answers_at_the_top_level(openapi):
    operation = openapi["paths"]["/lat/{address}/simulate-deposit"]["post"]
    ok = operation["responses"]["200"]["content"]["application/json"]
    shape = _resolve(openapi, ok["schema"])
    assert set(shape["properties"]) == {
        "success", "amounts", "fees", "pricesStale", "note",
        "reason", "reasonCode", "revert", "revertData",
    }  # fmt: skip
    assert set(shape["required"]) == {"success", "amounts", "fees", "pricesStale"}
    assert shape["properties"]["pricesStale"]["nullable"] is True
    reason_codes = _resolve(openapi, shape["properties"]["reasonCode"]["allOf"][0])
    assert set(reason_codes["enum"]) >= {
        "paused", "price_refresh_failed", "unsupported_asset", "insufficient_balance",
        "insufficient_allowance", "unknown_error",
    }  # fmt: skip
    reverts = set()
    for example in ok["examples"].values():
        assert "data" not in example["value"]
        assert {"success", "amounts", "fees", "pricesStale"} <= set(example["value"])
        reverts.add(example["value"].get("revert"))
    # The examples show real Mainnet v1 reverts: OpenZeppelin 4.9's string, the LAT's own error.
    assert {"Pausable: paused", "PriceUpdateFailed()"} <= reverts
    # The deposit endpoint keeps its wrapper.
    build = openapi["paths"]["/lat/{address}/deposit"]["post"]["responses"]["200"]
    assert set(_resolve(openapi, build["content"]["application/json"]["schema"])["properties"]) == {
        "data"
    }


SUCCEEDED = DepositSimulation(
    success=True,
    amounts=(Decimal("0.998"), Decimal("2.725")),
    gas_limit=201532,
    gas_price=1875000000,
    management_fee=Decimal("2.5"),
    performance_fee=Decimal("10"),
    prices_stale=False,
)
AFTER_A_REFRESH = DepositSimulation(
    success=True,
    amounts=(Decimal("1.5"),),
    gas_limit=287114,
    gas_price=1000000000,
    management_fee=Decimal("0"),
    performance_fee=Decimal("0"),
    prices_stale=True,
)
# Error("Pausable: paused"), encoded by hand: selector, offset 32, length 16, the padded bytes.
PAUSED_DATA = (
    "0x"
    + keccak(text="Error(string)")[:4].hex()
    + (32).to_bytes(32, "big").hex()
    + (16).to_bytes(32, "big").hex()
    + b"Pausable: paused".hex().ljust(64, "0")
)
REVERTED = DepositSimulation(
    success=False,
    amounts=(),
    gas_limit=0,
    gas_price=1875000000,
    management_fee=Decimal("0"),
    performance_fee=Decimal("0"),
    failure=DepositFailure(
        "paused",
        "The LAT is paused: it accepts no deposits until it is unpaused.",
        "Pausable: paused",
        PAUSED_DATA,
    ),
    prices_stale=None,  # an older deployment's oracle has no such view
)
STALE_NOTE = (
    "The LAT's prices are stale at this block: the deposit first refreshes every token's price "
    "from its source (amounts and the gas estimate include that refresh)."
)


@pytest.mark.parametrize(
    ("simulation", "expected"),
    [
        (
            SUCCEEDED,
            {
                "success": True,
                "amounts": [0.998, 2.725],
                "fees": {
                    "gas": {
                        "gasLimit": "201532",
                        "gasPrice": "1875000000",
                        "gasFee": "377872500000000",  # 201532 x 1875000000, by hand
                    },
                    "service": {"managementFee": 2.5, "performanceFee": 10.0},
                },
                "pricesStale": False,
            },
        ),
        (
            AFTER_A_REFRESH,
            {
                "success": True,
                "amounts": [1.5],
                "fees": {
                    "gas": {
                        "gasLimit": "287114",
                        "gasPrice": "1000000000",
                        "gasFee": "287114000000000",
                    },
                    "service": {"managementFee": 0.0, "performanceFee": 0.0},
                },
                "pricesStale": True,
                "note": STALE_NOTE,
            },
        ),
        (
            REVERTED,
            {
                "success": False,
                "amounts": [],
                "fees": {
                    "gas": {"gasLimit": "0", "gasPrice": "1875000000", "gasFee": "0"},
                    "service": {"managementFee": 0.0, "performanceFee": 0.0},
                },
                "pricesStale": None,
                "reason": "The LAT is paused: it accepts no deposits until it is unpaused.",
                "reasonCode": "paused",
                "revert": "Pausable: paused",
                "revertData": PAUSED_DATA,
            },
        ),
    ],
)
def test_the_hand_built_simulation_body_is_the_documented_serializers(simulation, expected):
    """The view builds its body directly (deposit_simulation_data); the serializer documents
    it. Both give the answer written out here; the real answers are validated against the
    schema in tests/e2e/test_direct_restaking.py."""
    built = deposit_simulation_data(simulation)
    assert built == expected
    assert json.dumps(built) == json.dumps(expected)  # member order and JSON types too
    assert built == DepositSimulationSerializer(simulation).data


def test_schema_documents_the_cap_the_busy_refusal_and_the_deadline(openapi):
    for path in ("/lat/{address}/deposit", "/lat/{address}/simulate-deposit"):
        request = openapi["paths"][path]["post"]["requestBody"]["content"]["application/json"]
        properties = _resolve(openapi, request["schema"])["properties"]
        assert properties["assets"]["maxItems"] == 32
        assert properties["amounts"]["maxItems"] == 32
    responses = openapi["paths"]["/lat/{address}/simulate-deposit"]["post"]["responses"]
    assert "Retry-After" in responses["429"]["headers"]
    assert "SIMULATE_MAX_IN_FLIGHT" in responses["429"]["description"]
    assert "RATE_LIMIT_SIMULATE" in responses["429"]["description"]
    assert "SIMULATE_TIMEOUT" in responses["500"]["description"]


def test_error_docs_say_when_simulate_deposit_answers_429_and_500(client):
    html = client.get("/docs/errors").content.decode()
    rate_limit = html.split('id="rate_limit_exceeded"', 1)[1].split("</section>", 1)[0]
    assert "SIMULATE_MAX_IN_FLIGHT" in rate_limit
    assert "RATE_LIMIT_SIMULATE" in rate_limit
    server_error = html.split('id="internal_server_error"', 1)[1].split("</section>", 1)[0]
    assert "SIMULATE_TIMEOUT" in server_error
    assert "did not answer in time" in server_error


@pytest.mark.parametrize("endpoint", ["deposit", "simulate-deposit"])
def test_the_target_is_read_in_the_rate_limits_round_trip(api, dataset, settings, endpoint):
    """Once the LAT's deposit target is cached, a request costs one round trip to Redis (the
    rate limit's counters and the data's generation in one pipeline: the process holds its copy
    of the target) and no query; after a write, that trip finds the copy stale, the shared entry
    is read once (stale too: MGET) and the database once, and the next request is one trip
    again."""
    from core.api import documents
    from tests.redistrips import redis_trips

    settings.RPC_URL = closed_port_url()
    status = 200 if endpoint == "deposit" else 500
    path = f"/lat/{LAT}/{endpoint}"
    assert post(api, path, body(sender=WALLET)).status_code == status  # the target cached
    with redis_trips() as trips:
        with CaptureQueriesContext(connection) as captured:
            assert post(api, path, body(sender=WALLET)).status_code == status
        assert trips == ["pipeline"]
        assert len(captured) == 0
        documents.documents_changed()
        trips.clear()
        with CaptureQueriesContext(connection) as captured:
            assert post(api, path, body(sender=WALLET)).status_code == status
        assert trips == ["pipeline", "MGET", "SET"]
        assert len(captured) == 1
        trips.clear()
        with CaptureQueriesContext(connection) as captured:
            assert post(api, path, body(sender=WALLET)).status_code == status
        assert trips == ["pipeline"]
        assert len(captured) == 0
