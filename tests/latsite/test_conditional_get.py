"""Conditional GET on the read endpoints, through the whole stack (middleware, authentication,
rate limits): a weak ETag on every 200 of a read endpoint, a 304 with an empty body when
If-None-Match matches (one tag, a list, weak or strong, `*`), a new tag after a real write (a
model save, a metrics snapshot), different tags for different query strings, none on errors
and none outside the read endpoints; the same with the service's Redis stopped (a redis-server
of this module's own)."""

from __future__ import annotations

import datetime as dt
import itertools
import re
import time
import uuid

import pytest
from rest_framework_api_key.models import APIKey

from core import redisguard
from core.api import documents
from core.api.conditional import CACHE_CONTROL
from tests import factories as f
from tests.redisserver import cache_settings
from tests.redistrips import redis_trips

pytestmark = pytest.mark.django_db

A = f.address
LAT = A(0x1001)
WEAK_TAG = re.compile(r'W/"[0-9a-f]{32}"')
# Every read endpoint, on the hand-written data set (tests/conftest.py: dataset).
READ_PATHS = [
    "/lat",
    "/lat?withGrouping=true",
    f"/lat/{LAT}",
    f"/lat/{LAT}?withTvl=true&withCuratedMetadata=true&withRewards=true",
    f"/lat/{LAT}/tokens",
    f"/lat/{LAT}/fees",
    f"/lat/{LAT}/operators?withTvl=true",
    f"/lat/{LAT}/staker-nodes",
    "/lat/assets",
    f"/lat/exchange/{LAT}",
    f"/lat/avs/{A(0xA1)}",
    "/lat/operators",
    f"/lat/operators/{A(0x901)}?withTvl=true",
    "/metrics/deposits",
    f"/metrics/historical/lat/{LAT}",
    f"/metrics/historical/lat/{LAT}?endAt=2026-03-02&startAt=2026-02-01",
]


@pytest.fixture
def ip() -> str:
    """A client address of the test's own, so that rate-limit counters never meet."""
    n = uuid.uuid4().int
    return f"10.{n % 250}.{(n >> 8) % 250}.{(n >> 16) % 250}"


def etag_of(api, path: str, **headers) -> str:
    response = api.get(path, **headers)
    assert response.status_code == 200, (path, response.content)
    return response["ETag"]


@pytest.mark.parametrize("path", READ_PATHS)
def test_a_read_answer_carries_a_validator_and_a_matching_request_gets_304(api, dataset, path):
    first = api.get(path)
    assert first.status_code == 200
    etag = first["ETag"]
    assert WEAK_TAG.fullmatch(etag)
    assert first["Cache-Control"] == CACHE_CONTROL
    assert "RateLimit-Limit" in first

    again = api.get(path, HTTP_IF_NONE_MATCH=etag)
    assert again.status_code == 304
    assert again.content == b""
    assert again["ETag"] == etag
    assert again["Cache-Control"] == CACHE_CONTROL
    assert {"RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset"} <= set(again.headers)
    # Nothing changed: a plain GET gets the same tag and the same body.
    plain = api.get(path)
    assert plain["ETag"] == etag
    assert plain.content == first.content


def test_if_none_match_lists_weak_comparison_and_star(api, dataset):
    etag = etag_of(api, "/lat")
    strong = etag.removeprefix("W/")
    other = 'W/"' + "0" * 32 + '"'
    for header in (strong, f"{other}, {etag}", f'"x",{strong}', "*", f" {etag} "):
        assert api.get("/lat", HTTP_IF_NONE_MATCH=header).status_code == 304, header
    for header in (other, "", "garbage", etag.upper(), f'W/"{strong}"'):
        assert api.get("/lat", HTTP_IF_NONE_MATCH=header).status_code == 200, header


def test_a_write_changes_the_tag(api, dataset):
    path = f"/lat/{LAT}"
    before = api.get(path)
    dataset.eth_lat.name = "Renamed ETH LAT"
    dataset.eth_lat.save()  # what an admin edit or a refresh does
    after = api.get(path, HTTP_IF_NONE_MATCH=before["ETag"])
    assert after.status_code == 200
    assert after.json()["name"] == "Renamed ETH LAT"
    assert after["ETag"] != before["ETag"]
    assert api.get(path, HTTP_IF_NONE_MATCH=after["ETag"]).status_code == 304


def test_a_metrics_snapshot_changes_the_history_tag(api, dataset):
    path = f"/metrics/historical/lat/{LAT}?endAt=2026-03-02&startAt=2026-02-01"
    before = api.get(path)
    assert before.status_code == 200
    f.MetricSnapshotFactory(
        lat=dataset.eth_lat,
        timestamp=dt.datetime(2026, 3, 1, 12, tzinfo=dt.UTC),
        total_assets=1,
        total_supply=1,
    )
    after = api.get(path, HTTP_IF_NONE_MATCH=before["ETag"])
    assert after.status_code == 200
    assert after.content != before.content
    assert after["ETag"] != before["ETag"]


def test_query_strings_name_different_representations(api, dataset):
    tags = {
        path: etag_of(api, path)
        for path in (
            f"/lat/{LAT}",
            f"/lat/{LAT}?withTvl=true",
            f"/lat/{LAT}?withTvl=true&withRewards=true",
            f"/lat/{LAT}/tokens",
            "/metrics/deposits?take=1",
            "/metrics/deposits?take=2",
        )
    }
    assert len(set(tags.values())) == len(tags)
    # The order of the parameters does not make another representation.
    reordered = etag_of(api, f"/lat/{LAT}?withRewards=true&withTvl=true")
    assert reordered == tags[f"/lat/{LAT}?withTvl=true&withRewards=true"]
    # A tag of one URL does not validate another.
    response = api.get(f"/lat/{LAT}/tokens", HTTP_IF_NONE_MATCH=tags[f"/lat/{LAT}"])
    assert response.status_code == 200


def test_query_strings_that_select_one_stored_document_share_its_tag(api, dataset):
    """The LAT list and detail are stored documents: their tags stand on the document the
    parameters select, so spellings of one selection (a default given or not, the address in
    any letter case) share a tag and validate each other; another selection does not."""
    lower = f"/lat/{LAT.lower()}"
    spellings = [f"/lat/{LAT}", f"/lat/{LAT}?withTvl=false", lower, f"{lower}?withRewards=false"]
    bodies = {api.get(path).content for path in spellings}
    assert len(bodies) == 1  # one representation
    tags = {etag_of(api, path) for path in spellings}
    assert len(tags) == 1
    (tag,) = tags
    assert api.get(f"{lower}?withTvl=false", HTTP_IF_NONE_MATCH=tag).status_code == 304
    assert api.get(f"/lat/{LAT}?withTvl=true", HTTP_IF_NONE_MATCH=tag).status_code == 200
    assert etag_of(api, "/lat?withGrouping=false") == etag_of(api, "/lat")
    assert etag_of(api, "/lat?withGrouping=true") != etag_of(api, "/lat")


def test_the_api_key_does_not_change_the_tag(api, dataset):
    _, key = APIKey.objects.create_key(name="conditional")
    anonymous = etag_of(api, "/lat")
    assert etag_of(api, "/lat", HTTP_X_API_TOKEN=key) == anonymous
    assert api.get("/lat", HTTP_X_API_TOKEN=key, HTTP_IF_NONE_MATCH=anonymous).status_code == 304
    # A bad key is refused before any 304: the tag is no credential.
    refused = api.get("/lat", HTTP_X_API_TOKEN="nope.nope", HTTP_IF_NONE_MATCH=anonymous)
    assert refused.status_code == 401
    assert "ETag" not in refused


@pytest.mark.parametrize(
    ("path", "status"),
    [
        (f"/lat/{A(0xDEAD)}", 404),
        ("/lat/not-an-address", 422),
        ("/lat?withGrouping=maybe", 422),
        (f"/metrics/historical/lat/{LAT}?startAt=2026-03-02&endAt=2026-03-01", 422),
        ("/metrics/deposits?take=0", 422),
    ],
)
def test_errors_carry_no_tag(api, dataset, path, status):
    response = api.get(path)
    assert response.status_code == status
    assert "ETag" not in response
    assert response.get("Cache-Control") != CACHE_CONTROL
    # Not even with If-None-Match: * (nothing matches what does not exist).
    assert api.get(path, HTTP_IF_NONE_MATCH="*").status_code == status


def test_a_304_is_counted_by_the_rate_limit(api, dataset, settings, ip, minute_window):
    settings.RATE_LIMIT_ANON = "3/min"
    first = api.get("/lat", REMOTE_ADDR=ip)
    etag = first["ETag"]
    remaining = int(first["RateLimit-Remaining"])
    for _ in range(remaining):
        response = api.get("/lat", REMOTE_ADDR=ip, HTTP_IF_NONE_MATCH=etag)
        assert response.status_code == 304
        remaining -= 1
        assert response["RateLimit-Remaining"] == str(remaining)
    refused = api.get("/lat", REMOTE_ADDR=ip, HTTP_IF_NONE_MATCH=etag)
    assert refused.status_code == 429
    assert "ETag" not in refused


def test_only_the_read_endpoints_are_conditional(api, dataset):
    for path in ("/health", "/version", "/api/schema/", "/docs/errors"):
        assert "ETag" not in api.get(path), path
    body = {"assets": [A(0x5E)], "amounts": ["1"], "receiver": A(0x77)}
    built = api.post(f"/lat/{LAT}/deposit", body, format="json", HTTP_IF_NONE_MATCH="*")
    assert built.status_code == 200
    assert "ETag" not in built


def test_head_is_conditional_too(api, dataset):
    etag = etag_of(api, "/lat")
    response = api.head("/lat", HTTP_IF_NONE_MATCH=etag)
    assert response.status_code == 304
    assert response["ETag"] == etag


def test_history_without_end_moves_with_the_clock(api, dataset, monkeypatch):
    from django.utils import timezone

    path = f"/metrics/historical/lat/{LAT}"
    etag = etag_of(api, path)
    later = timezone.now() + dt.timedelta(minutes=1)
    monkeypatch.setattr(timezone, "now", lambda: later)
    assert api.get(path, HTTP_IF_NONE_MATCH=etag).status_code == 200


def test_the_schema_documents_conditional_get(api):
    schema = api.get("/api/schema/?format=json").json()
    for path, item in schema["paths"].items():
        operation = item.get("get")
        if operation is None:
            continue
        # Every read of the API but the status, whose lag moves with each head the jobs see.
        read = (
            path.startswith(("/lat", "/metrics", "/wallets", "/yields"))
            and path != "/lat/{address}/status"
        )
        names = {p["name"] for p in operation.get("parameters", []) if p["in"] == "header"}
        assert ("If-None-Match" in names) == read, path
        assert ("304" in operation["responses"]) == read, path
        if read:
            for code in ("200", "304"):
                assert {"ETag", "Cache-Control", "RateLimit-Limit"} <= set(
                    operation["responses"][code]["headers"]
                ), (path, code)


# --- Redis stopped ------------------------------------------------------------------------


@pytest.fixture
def redis_stopped(redis_server, settings):
    """The cache on this module's redis-server, which is then stopped: the generation is this
    process's own (core/api/documents.py)."""
    redis_server.ensure_running()
    settings.CACHES = cache_settings(redis_server, settings)
    settings.REDIS_RETRY_AFTER = 5.0
    settings.DOCUMENT_FALLBACK_SECONDS = 60  # no period boundary within the test
    redisguard.breaker.reset()
    documents.forget_pending_bumps()
    redis_server.stop()
    yield redis_server
    redis_server.ensure_running()
    redisguard.breaker.reset()
    documents.forget_pending_bumps()


def test_with_redis_stopped_conditional_get_still_works(api, dataset, redis_stopped):
    path = f"/lat/{LAT}?withTvl=true"
    first = api.get(path)
    assert first.status_code == 200
    assert "RateLimit-Limit" not in first  # the limits fail open: nothing was counted
    etag = first["ETag"]
    assert WEAK_TAG.fullmatch(etag)
    again = api.get(path, HTTP_IF_NONE_MATCH=etag)
    assert (again.status_code, again.content, again["ETag"]) == (304, b"", etag)
    assert etag_of(api, f"/lat/{LAT}") != etag
    assert api.get(f"/lat/{LAT}/nope").status_code == 404

    dataset.eth_lat.name = "Renamed while Redis is away"
    dataset.eth_lat.save()
    after = api.get(path, HTTP_IF_NONE_MATCH=etag)
    assert after.status_code == 200
    assert after.json()["name"] == "Renamed while Redis is away"
    assert after["ETag"] != etag
    assert api.get(path, HTTP_IF_NONE_MATCH=after["ETag"]).status_code == 304
    missing = api.get(f"/lat/{A(0xDEAD)}", HTTP_IF_NONE_MATCH="*")
    assert missing.status_code == 404
    assert "ETag" not in missing


def test_with_redis_stopped_the_tag_moves_each_fallback_period(
    api, dataset, redis_stopped, settings
):
    """Another process's writes cannot reach this process's generation: its tags last at most
    DOCUMENT_FALLBACK_SECONDS, as its documents do."""
    settings.DOCUMENT_FALLBACK_SECONDS = 1
    started = time.time()
    tags = [etag_of(api, "/lat")]
    while time.time() < started + 2.2:
        tags.append(etag_of(api, "/lat"))
        time.sleep(0.05)
    assert len(set(tags)) >= 2
    # Within one period the tag holds (consecutive equal tags are the rule, not the exception).
    assert sum(a == b for a, b in itertools.pairwise(tags)) > len(tags) // 2


def test_back_from_redis_the_shared_generation_is_used(api, dataset, redis_stopped):
    local = etag_of(api, "/lat")
    redis_stopped.ensure_running()
    redisguard.breaker.reset()
    shared = etag_of(api, "/lat")
    assert shared != local
    assert api.get("/lat", HTTP_IF_NONE_MATCH=shared).status_code == 304


def test_browsers_may_send_and_read_the_validator(api, dataset):
    preflight = api.options(
        "/lat",
        HTTP_ORIGIN="https://wallet.example",
        HTTP_ACCESS_CONTROL_REQUEST_METHOD="GET",
        HTTP_ACCESS_CONTROL_REQUEST_HEADERS="if-none-match",
    )
    assert "if-none-match" in preflight["Access-Control-Allow-Headers"]
    response = api.get("/lat", HTTP_ORIGIN="https://wallet.example")
    exposed = {h.strip().lower() for h in response["Access-Control-Expose-Headers"].split(",")}
    assert "etag" in exposed


# --- deposits written in bulk (no model signal) -------------------------------------------------


def _indexer_writing(dataset, *, fail: bool):
    """Stands in for the chain reader only: stores a deposit as the indexer does (in bulk,
    through deposit_record_events), then returns its summary or fails."""
    from activity.indexer import IndexSummary
    from chain.errors import ChainUnavailable
    from deposits.services import deposit_record_events

    def deposit_index(*, lat, progress=None):
        deposit_record_events(lat=lat, events=[f.event(10, 0)])
        if fail:
            raise ChainUnavailable("the node went away after one range")
        return IndexSummary(lat=lat.proxy_address, from_block=1, to_block=10, new=1, removed=0)

    return deposit_index


@pytest.mark.parametrize("fail", [False, True], ids=["indexed", "failed-after-a-range"])
def test_deposits_indexed_in_bulk_change_the_tag(api, dataset, monkeypatch, fail):
    from chain.errors import ChainUnavailable
    from sync import refresh

    before = api.get("/metrics/deposits")
    assert before.json()["meta"]["total"] == 0
    monkeypatch.setattr(refresh, "deposit_index", _indexer_writing(dataset, fail=fail))
    if fail:
        with pytest.raises(ChainUnavailable):
            refresh.index_deposits(lat=dataset.eth_lat)
    else:
        assert refresh.index_deposits(lat=dataset.eth_lat).new == 1
    after = api.get("/metrics/deposits", HTTP_IF_NONE_MATCH=before["ETag"])
    assert after.status_code == 200
    assert after.json()["meta"]["total"] == 1
    assert after["ETag"] != before["ETag"]


@pytest.mark.parametrize("path", [f"/lat/{LAT}?withTvl=true", "/metrics/deposits"])
def test_a_304_costs_no_database_query(api, dataset, path, django_assert_num_queries):
    etag = etag_of(api, path)
    with django_assert_num_queries(0):
        assert api.get(path, HTTP_IF_NONE_MATCH=etag).status_code == 304


@pytest.mark.parametrize("path", [f"/lat/{LAT}?withTvl=true", "/metrics/deposits", "/lat"])
def test_a_304_costs_one_round_trip_to_redis(api, dataset, path):
    """The rate limit's counters and the data's generation (for the tag) in one pipeline."""
    etag = etag_of(api, path)
    with redis_trips() as trips:
        assert api.get(path, HTTP_IF_NONE_MATCH=etag).status_code == 304
        assert trips == ["pipeline"]
        documents.documents_changed()  # a new generation: the same single trip finds it
        trips.clear()
        assert api.get(path, HTTP_IF_NONE_MATCH=etag).status_code == 200
        assert trips[0] == "pipeline"
        assert "GET" not in trips
