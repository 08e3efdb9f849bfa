"""The cache of the LAT documents: served on a hit, dropped by any write behind them."""

from __future__ import annotations

import contextlib

import pytest
from django.core.cache import cache
from django.db import connection, connections, transaction
from django.test.utils import CaptureQueriesContext
from django_redis import get_redis_connection

from core import telemetry
from core.api import documents
from core.api.documents import _keys, document_keys
from lats.avs_metadata import avs_apply_metadata
from metrics.services import snapshot_record
from tests import factories as f

pytestmark = pytest.mark.django_db

A = f.address


def queries(api, path) -> tuple[dict, int]:
    with CaptureQueriesContext(connection) as captured:
        response = api.get(path)
    assert response.status_code == 200
    return response.json(), len(captured.captured_queries)


def test_a_hit_reads_no_database(api, dataset):
    first, n_first = queries(api, "/lat")
    second, n_second = queries(api, "/lat")
    assert n_first > 0
    assert n_second == 0
    assert second == first


def test_a_hit_held_by_the_process_reads_the_generation_alone(api, dataset):
    """A process answers a hit from its own copy of the cache entry while the generation read
    ahead is the entry's, without reading the document from Redis again; a write ends it."""
    path = f"/lat/{A(0x1001)}"
    name = f"json:lat:{A(0x1001)}:False:False:False"
    generation_key, document_key = _keys(name)
    miss = api.get(path)
    assert miss.status_code == 200
    assert document_keys(name) == [generation_key]  # the copy is held: only the generation
    cache.delete(document_key)  # not read again: the copy answers at the same generation
    hit, n_hit = queries(api, path)
    assert n_hit == 0
    assert hit == miss.json()
    dataset.eth_lat.name = "Renamed"
    dataset.eth_lat.save()  # a new generation: the copy is not answered
    assert api.get(path).json()["name"] == "Renamed"


def database_reads(target: str) -> float:
    """lat_database_reads_total{target} of this process (core/telemetry.py)."""
    return telemetry.DATABASE_READS.labels(target)._value.get()


@pytest.mark.parametrize(
    "path", ["/lat", f"/lat/{A(0x1001)}?withTvl=true&withCuratedMetadata=true&withRewards=true"]
)
def test_a_hit_touches_no_database_and_is_counted_by_none(api, dataset, path):
    """A stored document found in the cache is the answer: no query on any database alias
    (primary or replica), and no database counted as the one that answered it."""
    before = database_reads("primary")
    miss = api.get(path)
    assert miss.status_code == 200
    assert database_reads("primary") == before + 1  # built from the primary
    with contextlib.ExitStack() as stack:
        captured = [stack.enter_context(CaptureQueriesContext(c)) for c in connections.all()]
        hit = api.get(path)
    assert hit.status_code == 200
    assert [len(c.captured_queries) for c in captured] == [0] * len(captured)
    assert database_reads("primary") == before + 1
    assert hit.content == miss.content
    assert hit["ETag"] == miss["ETag"]


@pytest.mark.parametrize(
    "change",
    [
        lambda d: setattr(d.eth_lat, "name", "Renamed") or d.eth_lat.save(),
        lambda d: setattr(d.eth_steth, "price_per_unit", 2 * 10**18) or d.eth_steth.save(),
        lambda d: setattr(d.steth, "symbol", "wstETH") or d.steth.save(),
        lambda d: d.eth_usdx.delete(),
        lambda d: setattr(d.avs, "metadata_name", "Staff") or d.avs.save(),
        lambda d: d.node0.assets.first().delete(),
    ],
    ids=["lat", "token-link", "token", "token-removed", "avs", "node-asset"],
)
def test_any_write_behind_the_documents_drops_them(api, dataset, change):
    path = f"/lat/{A(0x1001)}?withTvl=true&withCuratedMetadata=true"
    before, _ = queries(api, path)
    change(dataset)
    after, n_after = queries(api, path)
    assert n_after > 0
    assert after != before


def test_services_that_update_in_bulk_drop_them(api, dataset):
    path = f"/lat/{A(0x1001)}?withRewards=true"
    before, _ = queries(api, path)
    dataset.eth_lat.total_assets = 30 * 10**18  # the exchange rate grows
    dataset.eth_lat.save()
    f.MetricSnapshotFactory(lat=dataset.eth_lat, timestamp=dataset.eth_lat.created_at)
    snapshot_record(lat=dataset.eth_lat)
    after, _ = queries(api, path)
    assert after["apys"] != before["apys"]
    avs_apply_metadata(
        avs=dataset.avs, uri="data:x", block=1, document={"name": "From the document"}
    )
    assert (
        api.get(f"/lat/{A(0x1001)}?withCuratedMetadata=true").json()["curatedMetadata"][
            "metadataName"
        ]
        == "From the document"
    )


def test_cache_off(api, dataset, settings):
    settings.DOCUMENT_CACHE_SECONDS = 0
    queries(api, "/lat")
    _, n = queries(api, "/lat")
    assert n > 0


def test_entries_expire_within_document_cache_seconds(api, dataset, settings):
    settings.DOCUMENT_CACHE_SECONDS = 7
    queries(api, "/lat")
    _, document_key = _keys("json:lat-list:False")
    ttl = get_redis_connection("default").ttl(cache.make_key(document_key))
    assert 0 < ttl <= 7


@pytest.mark.django_db(transaction=True)
def test_a_transaction_invalidates_once_more_when_it_commits(api, dataset, monkeypatch):
    """Each write invalidates at once; the commit once more, however many rows the transaction
    wrote, and also when a savepoint with the first of them rolled back."""
    sets = []
    real = documents._set_generation
    monkeypatch.setattr(documents, "_set_generation", lambda key: sets.append(key) or real(key))
    link, path = dataset.eth_steth, f"/lat/{A(0x1001)}"
    with transaction.atomic():
        with contextlib.suppress(RuntimeError), transaction.atomic():
            link.price_per_unit = 3 * 10**18
            link.save()
            raise RuntimeError("the savepoint rolls back")
        for price in range(4, 9):
            link.price_per_unit = price * 10**18
            link.save()
        assert len(sets) == 6  # a bump per write, at once
        before, _ = queries(api, path)  # stored at the generation of the last write
    assert len(sets) == 7  # one more for the commit
    after, n_after = queries(api, path)
    assert n_after > 0  # the commit's bump dropped the stored document
    assert after == before
    assert before["tokens"][0]["pricePerUnit"] == str(8 * 10**18)
