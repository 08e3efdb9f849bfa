"""AVS metadata documents: what is fetched, what is kept, what is refused."""

from __future__ import annotations

import base64
import json

import pytest

from lats.avs_metadata import avs_apply_metadata
from lats.metadata import MetadataUnavailable, metadata_fetch
from tests import factories as f

pytestmark = pytest.mark.django_db


def data_uri(document) -> str:
    return (
        "data:application/json;base64," + base64.b64encode(json.dumps(document).encode()).decode()
    )


def test_data_uri_document():
    assert metadata_fetch(data_uri({"name": "X"})) == {"name": "X"}


@pytest.mark.parametrize(
    "uri",
    [
        "http://127.0.0.1:8000/meta.json",
        "http://localhost/meta.json",
        "http://10.1.2.3/meta.json",
        "http://169.254.169.254/latest/meta-data",
        "http://[::1]/x.json",
    ],
)
def test_private_hosts_are_refused(uri):
    with pytest.raises(MetadataUnavailable, match="not a public address"):
        metadata_fetch(uri)


@pytest.mark.parametrize(
    ("uri", "message"),
    [
        ("ftp://example.org/x.json", "unsupported"),
        ("data:application/json;base64,%%%", "not valid base64"),
        ("data:application/json," + "x" * 200_000, "over"),
        ("data:application/json,[1,2]", "not a JSON object"),
        ("data:application/json,{", "not JSON"),
    ],
)
def test_bad_documents_are_refused(uri, message):
    with pytest.raises(MetadataUnavailable, match=message):
        metadata_fetch(uri)


def test_document_seeds_fields_keeps_staff_edits_and_clears_dropped_members():
    avs = f.AvsFactory(
        metadata_name="Staff name",
        staff_edited_fields=["metadata_name"],
        metadata_messaging="https://t.me/old",
    )
    changed = avs_apply_metadata(
        avs=avs,
        uri="data:x",
        block=7,
        document={
            "name": "Document name",
            "website": "https://avs.example",
            "logo": "javascript:alert(1)",
            "twitter": "  https://x.com/avs  ",
            "github": 42,
        },
    )
    avs.refresh_from_db()
    assert avs.metadata_name == "Staff name"  # staff edited it
    assert avs.metadata_website == "https://avs.example"
    assert avs.metadata_logo is None  # not an http(s) link
    assert avs.metadata_social == "https://x.com/avs"
    assert avs.metadata_code is None  # not a string
    assert avs.metadata_messaging is None  # the document dropped `telegram`
    assert avs.metadata_updated_block == 7
    assert "metadata_name" not in changed
    # The same document again changes nothing.
    again = avs_apply_metadata(
        avs=avs,
        uri="data:x",
        block=7,
        document={
            "name": "Document name",
            "website": "https://avs.example",
            "logo": "javascript:alert(1)",
            "twitter": "https://x.com/avs",
            "github": 42,
        },
    )
    assert again == []
