"""The API's JSON renderer (core/api/renderers.py): orjson's bytes where they are DRF's, DRF's
renderer where orjson cannot give them."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from decimal import Decimal

import pytest
from django.utils.functional import lazy
from rest_framework.renderers import JSONRenderer as DrfRenderer

from core.api.renderers import JSONRenderer
from tests import factories as f

pytestmark = pytest.mark.django_db

WHEN = dt.datetime(2026, 11, 28, 17, 49, 50, 123456, tzinfo=dt.UTC)
LAZY = lazy(lambda: "lazy text", str)()


def both(data, media_type=None, context=None) -> tuple[bytes, bytes]:
    return (
        JSONRenderer().render(data, media_type, context),
        DrfRenderer().render(data, media_type, context),
    )


@pytest.mark.parametrize(
    "data",
    [
        {"data": [{"name": "baseline", "value": "1000000000000000000"}]},
        {"int": 2**63 - 1, "negative": -(2**63), "float": 0.1, "whole": 1234567.0, "none": None},
        {"bool": [True, False], "nested": {"list": [[], {}, [1, [2, {"a": "b"}]]]}},
        {"text": 'quote " backslash \\ slash / tab \t newline \n control \x01 \x1f'},
        {"unicode": "ÄÖÜ Ξ 中文 😀", "separators": "a\u2028b\u2029c"},
        {"decimal": Decimal("1.25"), "big decimal": Decimal("123456789.123456789")},
        {"when": WHEN, "day": WHEN.date(), "time": WHEN.time(), "naive": WHEN.replace(tzinfo=None)},
        {"other zone": WHEN.astimezone(dt.timezone(dt.timedelta(hours=2)))},
        {"uuid": uuid.UUID(int=0xABC), "lazy": LAZY, "tuple": (1, "two")},
    ],
    ids=["baseline", "numbers", "nesting", "escapes", "unicode", "decimal", "times", "tz", "misc"],
)
def test_the_same_bytes_as_drfs_renderer(data):
    mine, drf = both(data)
    assert mine == drf
    assert json.loads(mine) == json.loads(drf)


def test_unicode_line_separators_are_escaped_as_drf_escapes_them():
    body = JSONRenderer().render({"a": "x\u2028y\u2029z"})
    assert body == b'{"a":"x\\u2028y\\u2029z"}'


@pytest.mark.parametrize(
    "data",
    [
        {"uint256": 2**256 - 1},  # beyond orjson's 64 bits
        {"negative": -(2**64)},
        {1: "an integer key"},  # orjson takes string keys only
    ],
    ids=["uint256", "below int64", "int key"],
)
def test_what_orjson_refuses_is_rendered_by_drf(data):
    mine, drf = both(data)
    assert mine == drf
    assert json.loads(mine) == json.loads(drf)


def test_an_indentation_asked_for_is_drfs():
    data = {"a": [1, {"b": "c"}]}
    mine, drf = both(data, "application/json; indent=4")
    assert mine == drf == json.dumps(data, indent=4).encode()
    mine, drf = both(data, None, {"indent": 2})
    assert mine == drf == json.dumps(data, indent=2).encode()


def test_nothing_renders_as_no_body():
    assert JSONRenderer().render(None) == b""


def test_floats_parse_to_the_same_numbers():
    floats = [1e-7, 1.5e20, 1e16, 123.456, 2.0**-1074, 1.7976931348623157e308, -0.0]
    mine, drf = both({"floats": floats})
    assert json.loads(mine) == json.loads(drf) == {"floats": floats}


def test_not_a_number_renders_as_null():
    assert JSONRenderer().render({"x": float("nan"), "y": float("inf")}) == b'{"x":null,"y":null}'


def test_the_api_answers_with_it(api):
    """A listing and a stored document (core/api/conditional.py) come out of the renderer."""
    lat = f.LatFactory()
    for path in ("/lat", f"/lat/{lat.proxy_address}?withTvl=true&withCuratedMetadata=true"):
        response = api.get(path)
        assert response.status_code == 200, response.content
        assert response.content == DrfRenderer().render(json.loads(response.content))
    # A listing rendered for its request.
    response = api.get("/metrics/deposits", HTTP_ACCEPT="application/json; indent=2")
    assert response.content == json.dumps(json.loads(response.content), indent=2).encode()


def test_a_stored_document_is_indented_where_asked(api):
    """A stored document (stored compact) answers an Accept asking for an indentation with
    that indentation, when it is built and when it is found; compact otherwise."""
    lat = f.LatFactory()
    path = f"/lat/{lat.proxy_address}?withTvl=true"
    indented = api.get(path, HTTP_ACCEPT="application/json; indent=4")  # built (a miss)
    compact = api.get(path)  # found
    again = api.get(path, HTTP_ACCEPT="application/json; indent=4")  # found
    assert indented.status_code == compact.status_code == again.status_code == 200
    data = json.loads(compact.content)
    assert data["proxyAddress"] == lat.proxy_address
    assert compact.content == json.dumps(data, separators=(",", ":")).encode()
    assert indented.content == again.content == json.dumps(data, indent=4).encode()
    assert indented["ETag"] == compact["ETag"] == again["ETag"]  # weak: the same data
    assert api.get(path, HTTP_ACCEPT="application/json").content == compact.content
