"""The OpenAPI document validates, documents every path, and the docs pages work offline."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
PATHS = {
    "/lat": ["get"],
    "/lat/{address}": ["get"],
    "/lat/{address}/tokens": ["get"],
    "/lat/assets": ["get"],
    "/lat/operators": ["get"],
    "/lat/operators/{address}": ["get"],
    "/lat/{address}/operators": ["get"],
    "/lat/{address}/staker-nodes": ["get"],
    "/lat/exchange/{address}": ["get"],
    "/lat/{address}/fees": ["get"],
    "/lat/avs/{address}": ["get"],
    "/metrics/historical/lat/{address}": ["get"],
    "/metrics/deposits": ["get"],
    "/lat/{address}/deposit": ["post"],
    "/lat/{address}/simulate-deposit": ["post"],
    "/lat/{address}/holders": ["get"],
    "/lat/{address}/events": ["get"],
    "/lat/{address}/status": ["get"],
    "/wallets/{address}": ["get"],
    "/webhooks": ["get", "post"],
    "/webhooks/{id}": ["get", "patch", "delete"],
    "/webhooks/{id}/rotate-secret": ["post"],
    "/webhooks/{id}/test": ["post"],
    "/webhooks/{id}/deliveries": ["get"],
    "/webhooks/{id}/deliveries/{deliveryId}/retry": ["post"],
    "/health": ["get"],
    "/version": ["get"],
}
# Addresses that name no resource of the service: a wallet never seen is 200 with no positions.
NEVER_NOT_FOUND = {"/wallets/{address}"}
# Operations for load balancers and ops: no API key is read and no rate limit counts them.
OPS = {"/health", "/version"}
# Operations that need an API key (extensions.md, "Webhooks"): without one, 401.
KEYED_PREFIX = "/webhooks"


def api_operations(schema: dict):
    for path, item in schema["paths"].items():
        if path not in OPS:
            for method, operation in item.items():
                yield path, method, operation


@pytest.fixture(scope="module")
def schema(tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("schema") / "openapi.yaml"
    result = subprocess.run(
        [
            sys.executable,
            "manage.py",
            "spectacular",
            "--validate",
            "--fail-on-warn",
            "--file",
            str(out),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=os.environ.copy(),
        check=False,
    )
    assert result.returncode == 0, result.stderr + result.stdout
    return yaml.safe_load(out.read_text())


def test_schema_validates_and_lists_every_path(schema):
    for path, methods in PATHS.items():
        assert path in schema["paths"], path
        for method in methods:
            assert method in schema["paths"][path]


def test_every_operation_documents_errors_and_parameters(schema):
    for path, method, operation in api_operations(schema):
        responses = operation["responses"]
        assert "500" in responses, (path, method)
        assert "429" in responses, (path, method)
        assert "414" in responses, (path, method)  # the web server's, before the API
        if method == "post":
            assert "400" in responses, path
        if "{address}" in path:
            assert ("404" in responses) == (path not in NEVER_NOT_FOUND), path
            assert "422" in responses, path
            param = next(p for p in operation["parameters"] if p["name"] == "address")
            assert param["schema"]["pattern"] == "^0x[a-fA-F0-9]{40}$"


def test_ops_operations_take_no_key_and_document_their_answers(schema):
    health = schema["paths"]["/health"]["get"]
    assert set(health["responses"]) == {"200", "503", "500", "414"}
    assert set(schema["paths"]["/version"]["get"]["responses"]) == {"200", "500", "414"}
    for path in OPS:
        assert schema["paths"][path]["get"]["security"] == [{}], path


def test_toggles_are_documented_enums_with_defaults(schema):
    params = {p["name"]: p for p in schema["paths"]["/lat/{address}"]["get"]["parameters"]}
    for name in ["withTvl", "withCuratedMetadata", "withRewards"]:
        assert sorted(params[name]["schema"]["enum"]) == ["false", "true"]
        assert params[name]["schema"]["default"] == "false"
    deposits = {p["name"]: p for p in schema["paths"]["/metrics/deposits"]["get"]["parameters"]}
    assert deposits["take"]["schema"]["default"] == 12
    assert set(deposits) >= {"skip", "take", "liquidTokenAddress", "sender", "receiver", "asset"}


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/api/docs/", "/api/redoc/"])
def test_docs_pages_load_their_assets_locally(client, path):
    response = client.get(path)
    assert response.status_code == 200
    html = response.content.decode()
    assert "cdn.jsdelivr.net" not in html
    assert "/static/drf_spectacular_sidecar/" in html


@pytest.mark.django_db
def test_schema_endpoint_serves(client):
    response = client.get("/api/schema/", HTTP_ACCEPT="application/json")
    assert response.status_code == 200


def _params(schema: dict, path: str, method: str = "get") -> dict[str, dict]:
    return {p["name"]: p for p in schema["paths"][path][method]["parameters"]}


def test_paging_bounds_are_stated(schema):
    params = _params(schema, "/metrics/deposits")
    assert params["skip"]["schema"] == {
        "type": "integer",
        "minimum": 0,
        "maximum": 999_999_999_999_999_999,
        "default": 0,
    }
    assert params["take"]["schema"] == {
        "type": "integer",
        "minimum": 1,
        "maximum": 100,
        "default": 12,
    }
    for name in ["liquidTokenAddress", "sender", "receiver", "asset"]:
        assert params[name]["schema"]["pattern"] == "^0x[a-fA-F0-9]{40}$"


def test_historical_parameters_are_stated(schema):
    params = _params(schema, "/metrics/historical/lat/{address}")
    assert params["frequency"]["schema"]["enum"] == ["1d", "7d"]
    assert sorted(params["variant"]["schema"]["enum"]) == ["cumulative", "discrete"]
    for name in ["startAt", "endAt"]:
        assert params[name]["schema"] == {
            "anyOf": [
                {"type": "string", "format": "date"},
                {"type": "string", "format": "date-time"},
            ]
        }
    assert "23:59:59.999999" in params["endAt"]["description"]


@pytest.mark.parametrize(
    ("path", "component", "required"),
    [
        ("/lat/{address}/deposit", "DepositBodyRequest", ["amounts", "assets", "receiver"]),
        (
            "/lat/{address}/simulate-deposit",
            "SimulateDepositBodyRequest",
            ["amounts", "assets", "receiver", "sender"],
        ),
    ],
)
def test_deposit_bodies_are_stated(schema, path, component, required):
    body = schema["paths"][path]["post"]["requestBody"]
    assert body["required"] is True
    assert list(body["content"]) == ["application/json"]
    assert body["content"]["application/json"]["schema"]["$ref"].endswith("/" + component)
    shape = schema["components"]["schemas"][component]
    assert sorted(shape["required"]) == required
    for name in ["assets", "amounts"]:
        assert shape["properties"][name]["minItems"] == 1
        assert shape["properties"][name]["maxItems"] == 32
    assert shape["properties"]["assets"]["items"]["pattern"] == "^0x[a-fA-F0-9]{40}$"
    assert shape["properties"]["amounts"]["items"]["pattern"] == r"^\d+$"
    assert shape["properties"]["receiver"]["pattern"] == "^0x[a-fA-F0-9]{40}$"


def test_the_optional_api_key_is_stated_on_every_operation(schema):
    scheme = schema["components"]["securitySchemes"]["ApiKey"]
    assert (scheme["type"], scheme["in"], scheme["name"]) == ("apiKey", "header", "X-API-Token")
    for path, method, operation in api_operations(schema):
        keyed = path.startswith(KEYED_PREFIX)
        assert operation["security"] == ([{"ApiKey": []}] if keyed else [{"ApiKey": []}, {}]), (
            path,
            method,
        )
        assert {"401", "403"} <= set(operation["responses"]), (path, method)
