"""The error contract: every failure is {"error": {code, message, doc_url}} with its status."""

from __future__ import annotations

import datetime as dt
import json
import logging
from decimal import Decimal

import pytest
from django.db import connection
from django.http import QueryDict
from django.test import Client

from core.middleware import plain_query
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
    body = json.loads(response.content)
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
    from metrics import selectors

    def explode(**kwargs):
        raise RuntimeError("secret internals: postgres://user:pw@db/x")

    monkeypatch.setattr(selectors, "lat_detail", explode)
    client = Client(raise_request_exception=False)
    with caplog.at_level(logging.ERROR):
        response = client.get(f"/lat/{A(0x1001)}")
    error = assert_error(response, 500, "internal_server_error")
    assert "secret" not in response.content.decode()
    assert "postgres" not in error["message"]
    assert any("secret internals" in str(r.exc_info) for r in caplog.records if r.exc_info)
    # Logged once, with its traceback: not again by Django as a bare "Internal Server Error".
    assert [r.name for r in caplog.records if r.levelno >= logging.ERROR] == ["core.api.errors"]


def test_django_500_handler_answers_error_body(rf):
    from core.api.errors import handler500

    response = handler500(rf.get("/x"))
    assert response.status_code == 500
    assert b'"internal_server_error"' in response.content


def test_database_down_is_500_json(api, dataset, monkeypatch):
    def broken(*args, **kwargs):
        from django.db import OperationalError

        raise OperationalError("could not connect to server at 10.0.0.1")

    monkeypatch.setattr(connection, "cursor", broken)
    monkeypatch.setattr(connection, "chunked_cursor", broken)
    monkeypatch.setattr(connection, "ensure_connection", broken)  # prepared statements' way
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


# --- historical dates out of range ------------------------------------------------------------

HISTORY = f"/metrics/historical/lat/{A(0x1001)}"


@pytest.mark.parametrize(
    ("query", "name"),
    [
        ("startAt=0001-01-01", "startAt"),
        ("endAt=9999-12-31T23:59:59-05:00", "endAt"),  # past year 9999 in UTC
        ("endAt=9999-12-31", "endAt"),  # its end of day is the largest datetime
        ("endAt=9999-12-31T00:00:00Z", "endAt"),
        ("endAt=0001-01-01T00:00:00%2B05:00", "endAt"),  # before year 1 in UTC
        ("endAt=0001-01-08&frequency=7d", "endAt"),  # the default window would reach year 0
        ("startAt=0001-01-01&endAt=0001-01-02", "endAt"),
        ("startAt=1969-12-31T23:59:59Z&endAt=1970-01-02", "startAt"),
        ("startAt=1970-01-01T00:00:00%2B00:01&endAt=1970-01-02", "startAt"),
    ],
)
def test_historical_instant_out_of_range_is_422(api, dataset, query, name):
    error = assert_error(api.get(f"{HISTORY}?{query}"), 422, "unprocessable_entity")
    assert error["message"] == f"{name} must fall between 1970-01-01 and 9999-12-30 (UTC)."


@pytest.mark.parametrize(
    "query",
    [
        "endAt=1970-01-01T00:00:00Z&frequency=7d",  # the default window reaches into 1969
        "startAt=1970-01-01&endAt=1970-01-01",
        "startAt=9999-12-01&endAt=9999-12-30",
        "startAt=9999-12-30T23:59:59.999999Z&endAt=9999-12-30",
    ],
)
def test_historical_extreme_instants_in_range_answer(api, dataset, query):
    response = api.get(f"{HISTORY}?{query}")
    assert response.status_code == 200, response.content
    assert response.json() == {"data": []}  # the data set has no snapshot


def test_date_only_end_at_is_the_end_of_that_day(api, dataset):
    def snapshot(timestamp: dt.datetime, tvl: str) -> None:
        f.MetricSnapshotFactory(
            lat=dataset.eth_lat, timestamp=timestamp, total_tvl_eth=Decimal(tvl), total_users=1
        )

    snapshot(dt.datetime(2026, 4, 30, 12, tzinfo=dt.UTC), "10")
    snapshot(dt.datetime(2026, 5, 1, 23, 59, 59, tzinfo=dt.UTC), "11")
    snapshot(dt.datetime(2026, 5, 2, tzinfo=dt.UTC), "12")  # the next day: not in the window
    response = api.get(HISTORY, {"startAt": "2026-04-30", "endAt": "2026-05-01"})
    assert response.status_code == 200
    data = response.json()["data"]
    assert [(p["timestamp"], p["totalTvlEth"]) for p in data] == [
        ("2026-04-30T23:59:59.999999Z", 10.0),
        ("2026-05-01T23:59:59.999999Z", 11.0),
    ]


# --- too many query parameters ------------------------------------------------------------------


@pytest.mark.parametrize(
    "path", ["/lat", HISTORY, "/metrics/deposits", "/docs/errors", "/health", "/api/schema/"]
)
def test_too_many_query_parameters_is_400(api, dataset, settings, path):
    limit = settings.DATA_UPLOAD_MAX_NUMBER_FIELDS
    assert limit == 1000
    query = "&".join(f"p{i}=1" for i in range(limit + 1))
    error = assert_error(api.get(f"{path}?{query}"), 400, "bad_request")
    assert "too many query" in error["message"]
    query = "&".join(f"p{i}=1" for i in range(limit))
    assert api.get(f"{path}?{query}").status_code == 200


@pytest.mark.parametrize(
    ("query", "fields"),
    [
        ("withTvl=true&withRewards=false", [("withTvl", ["true"]), ("withRewards", ["false"])]),
        ("a=1&a=2&b=", [("a", ["1", "2"]), ("b", [""])]),
        ("x_y.z~-=A-b_9", [("x_y.z~-", ["A-b_9"])]),
    ],
)
def test_a_plain_query_string_is_split_as_django_parses_it(query, fields):
    parsed = plain_query(query)
    assert parsed is not None
    assert list(parsed.lists()) == fields == list(QueryDict(query).lists())
    with pytest.raises(AttributeError):  # immutable, as request.GET is
        parsed["c"] = "3"


@pytest.mark.parametrize(
    "query", ["", "a=%41", "a=1+2", "a", "a=1&&b=2", "=1", "a=1;b=2", "\xe9=1", "a=1&b"]
)
def test_any_other_query_string_is_left_to_django(query):
    assert plain_query(query) is None


def test_a_plain_query_string_past_the_limit_is_left_to_django(settings):
    limit = settings.DATA_UPLOAD_MAX_NUMBER_FIELDS
    assert plain_query("&".join(f"p{i}=1" for i in range(limit))) is not None
    assert plain_query("&".join(f"p{i}=1" for i in range(limit + 1))) is None


def test_too_many_query_parameters_on_a_post_is_400(api, dataset):
    query = "&".join(f"p{i}=1" for i in range(1001))
    response = api.post(f"/lat/{A(0x1001)}/deposit?{query}", data={}, format="json")
    assert_error(response, 400, "bad_request")


def test_suspicious_operation_inside_a_view_is_400():
    from django.core.exceptions import TooManyFieldsSent

    from core.api.errors import exception_handler

    response = exception_handler(TooManyFieldsSent("x"), {})
    assert response.status_code == 400
    assert response.data["error"]["code"] == "bad_request"


# --- every non-API page answers errors as JSON --------------------------------------------------

PAGES = ["/docs", "/docs/errors", "/health", "/api/schema/", "/api/docs/", "/api/redoc/"]


@pytest.mark.parametrize("path", PAGES)
def test_pages_answer_get_and_head(path):
    client = Client(enforce_csrf_checks=True)
    assert client.get(path).status_code == 200
    assert client.head(path).status_code == 200


@pytest.mark.parametrize("method", ["post", "put", "patch", "delete"])
@pytest.mark.parametrize("path", PAGES)
def test_pages_refuse_other_methods_with_json_405(path, method):
    # A browser-like client that enforces CSRF: a POST must not meet Django's CSRF page.
    client = Client(enforce_csrf_checks=True)
    response = getattr(client, method)(path, data="{}", content_type="application/json")
    error = assert_error(response, 405, "bad_request")
    assert method.upper() in error["message"]
    assert "GET" in response["Allow"]


def test_post_to_a_static_file_is_json_405():
    response = Client().post("/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui.css")
    assert_error(response, 405, "bad_request")
    assert response["Allow"] == "GET, HEAD"


@pytest.mark.parametrize("method", ["post", "put", "delete"])
def test_unknown_path_with_any_method_is_404_not_csrf(method):
    client = Client(enforce_csrf_checks=True)
    assert_error(getattr(client, method)("/nope"), 404, "not_found")


def test_csrf_failure_is_json_outside_admin_and_django_page_in_admin(rf):
    from django.middleware.csrf import _get_failure_view

    failure_view = _get_failure_view()
    response = failure_view(rf.post("/lat"), reason="CSRF cookie not set.")
    error = assert_error(response, 403, "forbidden")
    assert "CSRF" in error["message"]
    response = failure_view(rf.post("/admin/login/"), reason="CSRF cookie not set.")
    assert response.status_code == 403
    assert response["Content-Type"].startswith("text/html")


def test_admin_csrf_failure_is_django_page():
    response = Client(enforce_csrf_checks=True).post(
        "/admin/login/", {"username": "a", "password": "b"}
    )
    assert response.status_code == 403
    assert response["Content-Type"].startswith("text/html")
    assert b"CSRF" in response.content


def test_html_error_from_a_library_becomes_the_error_body(rf):
    from django.http import HttpResponse

    from core.middleware import JsonErrorPagesMiddleware

    def view(request):
        response = HttpResponse("<h1>Slow down</h1>", status=429)
        response["Retry-After"] = "7"
        return response

    response = JsonErrorPagesMiddleware(view)(rf.get("/lat"))
    assert_error(response, 429, "rate_limit_exceeded")
    assert response["Retry-After"] == "7"
    admin_response = JsonErrorPagesMiddleware(view)(rf.get("/admin/"))
    assert admin_response.content == b"<h1>Slow down</h1>"


# --- request bodies in a charset other than UTF-8 -----------------------------------------------

BODY = {"assets": [], "amounts": [], "receiver": A(0xE1), "sender": A(0xE1)}


@pytest.mark.parametrize("endpoint", ["deposit", "simulate-deposit"])
@pytest.mark.parametrize(
    ("content_type", "encoding"),
    [
        ("application/json; charset=latin-1", "latin-1"),
        ("application/json; charset=ISO-8859-1", "latin-1"),
        ("application/json; charset=utf-16", "utf-16"),
        ("application/json; charset=utf-16", "utf-8"),
        ("application/json; charset=no-such-charset", "utf-8"),
        ("application/json", "utf-16"),  # no charset: read as UTF-8, and it is not
        ("application/json", "utf-16-le"),
        ("application/json", "utf-32"),
    ],
)
def test_body_not_in_utf8_is_400(api, dataset, endpoint, content_type, encoding):
    body = json.dumps({**BODY, "note": "déjà"}).encode(encoding)
    response = api.generic(
        "POST", f"/lat/{A(0x1001)}/{endpoint}", data=body, content_type=content_type
    )
    assert_error(response, 400, "bad_request")


@pytest.mark.parametrize("endpoint", ["deposit", "simulate-deposit"])
@pytest.mark.parametrize("charset", ["utf-8", "UTF-8", "utf8"])
def test_utf8_charset_is_accepted(api, dataset, endpoint, charset):
    body = json.dumps({**BODY, "note": "déjà"}).encode()
    response = api.generic(
        "POST",
        f"/lat/{A(0x1001)}/{endpoint}",
        data=body,
        content_type=f"application/json; charset={charset}",
    )
    # Past the body checks: the empty assets are the (only) problem.
    error = assert_error(response, 422, "unprocessable_entity")
    assert "assets" in error["message"]
