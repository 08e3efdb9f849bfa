"""The error contract: every failure is {"error": {code, message, doc_url}} with its status."""

from __future__ import annotations

import logging

import pytest
from django.db import connection
from django.test import Client

from deposits.models import Deposit
from tests import factories as f

pytestmark = pytest.mark.django_db

A = f.address
BAD_ADDRESSES = [
    "0x123",
    "not-an-address",
    "0x" + "g" * 40,
    "0x" + "a" * 41,
    A(0x1001)[2:],
    A(0x1001) + "%0A",  # a trailing newline
    "%200x" + "a" * 40,
]


def assert_error(response, status: int, code: str) -> dict:
    assert response.status_code == status, response.content
    assert response["Content-Type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"error"}
    assert set(body["error"]) == {"code", "message", "doc_url"}
    assert body["error"]["code"] == code
    assert body["error"]["doc_url"] == f"/docs/errors#{code}"
    assert body["error"]["message"]
    return body["error"]


@pytest.mark.parametrize("bad", BAD_ADDRESSES)
@pytest.mark.parametrize(
    "template",
    [
        "/lat/{}",
        "/lat/{}/tokens",
        "/lat/{}/operators",
        "/lat/{}/staker-nodes",
        "/lat/{}/fees",
        "/lat/operators/{}",
        "/lat/exchange/{}",
        "/lat/avs/{}",
        "/metrics/historical/lat/{}",
    ],
)
def test_malformed_path_address_is_422(api, dataset, template, bad):
    error = assert_error(api.get(template.format(bad)), 422, "unprocessable_entity")
    assert "address" in error["message"]


@pytest.mark.parametrize("name", ["liquidTokenAddress", "sender", "receiver", "asset"])
def test_malformed_query_address_is_422(api, dataset, name):
    error = assert_error(api.get(f"/metrics/deposits?{name}=0xabc"), 422, "unprocessable_entity")
    assert name in error["message"]


@pytest.mark.parametrize(
    ("path", "name"),
    [
        ("/lat?withGrouping=yes", "withGrouping"),
        ("/lat?withGrouping=True", "withGrouping"),
        ("/lat/{lat}?withTvl=1", "withTvl"),
        ("/lat/{lat}?withCuratedMetadata=", "withCuratedMetadata"),
        ("/lat/{lat}?withRewards=no", "withRewards"),
        ("/lat/{lat}/operators?withTvl=TRUE", "withTvl"),
        ("/lat/operators/{op}?withTvl=on", "withTvl"),
    ],
)
def test_bad_toggle_is_422(api, dataset, path, name):
    url = path.format(lat=A(0x1001), op=A(0x901))
    error = assert_error(api.get(url), 422, "unprocessable_entity")
    assert name in error["message"]


@pytest.mark.parametrize(
    "query",
    [
        "skip=-1",
        "skip=abc",
        "skip=1.5",
        "take=0",
        "take=101",
        "take=-5",
        "take=x",
        "skip=",
        "take=5%0A",
        "skip=%D9%A1",
    ],
)
def test_bad_paging_is_422(api, dataset, query):
    before = Deposit.objects.count()
    assert_error(api.get(f"/metrics/deposits?{query}"), 422, "unprocessable_entity")
    assert Deposit.objects.count() == before


def test_unknown_path_is_404(api, dataset):
    for path in ["/nope", "/lat/", f"/lat/{A(0x1001)}/unknown", "/metrics", "/metrics/deposits/1"]:
        assert_error(api.get(path), 404, "not_found")


def test_unknown_path_is_404_json_in_debug_too(api, dataset, settings):
    settings.DEBUG = True
    assert_error(api.get("/definitely/not/here"), 404, "not_found")


@pytest.mark.parametrize("method", ["post", "put", "patch", "delete"])
def test_wrong_method_is_405_bad_request(api, dataset, method):
    response = getattr(api, method)("/lat", data={}, format="json")
    assert_error(response, 405, "bad_request")


def test_unknown_query_parameters_are_ignored(api, dataset):
    assert api.get("/lat?foo=bar").status_code == 200


def test_unexpected_failure_is_500_without_internals(dataset, monkeypatch, caplog):
    from lats import selectors

    def explode(**kwargs):
        raise RuntimeError("secret internals: postgres://user:pw@db/x")

    monkeypatch.setattr(selectors, "lat_record", explode)
    client = Client(raise_request_exception=False)
    with caplog.at_level(logging.ERROR):
        response = client.get(f"/lat/{A(0x1001)}")
    error = assert_error(response, 500, "internal_server_error")
    assert "secret" not in response.content.decode()
    assert "postgres" not in error["message"]
    assert any("secret internals" in str(r.exc_info) for r in caplog.records if r.exc_info)


def test_django_500_handler_answers_error_body(rf):
    from latsite.api.errors import handler500

    response = handler500(rf.get("/x"))
    assert response.status_code == 500
    assert b'"internal_server_error"' in response.content


def test_database_down_is_500_json(api, dataset, monkeypatch):
    def broken(*args, **kwargs):
        from django.db import OperationalError

        raise OperationalError("could not connect to server at 10.0.0.1")

    monkeypatch.setattr(connection, "cursor", broken)
    monkeypatch.setattr(connection, "chunked_cursor", broken)
    client = Client(raise_request_exception=False)
    response = client.get("/lat")
    assert_error(response, 500, "internal_server_error")
    assert b"10.0.0.1" not in response.content


def test_error_docs_page_has_an_anchor_per_code(client):
    response = client.get("/docs/errors")
    assert response.status_code == 200
    html = response.content.decode()
    for code in [
        "bad_request",
        "unauthorized",
        "forbidden",
        "not_found",
        "unprocessable_entity",
        "rate_limit_exceeded",
        "internal_server_error",
    ]:
        assert f'id="{code}"' in html


def test_doc_url_follows_setting(api, dataset, settings):
    settings.DOCS_URL = "https://docs.example.com/lat"
    body = api.get("/nope").json()
    assert body["error"]["doc_url"] == "https://docs.example.com/lat/errors#not_found"
