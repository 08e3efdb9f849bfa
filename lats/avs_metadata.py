"""The refresh of an AVS's curated metadata from its latest metadata document on the chain.

The document is named by the latest `AVSMetadataURIUpdated(address indexed avs, string
metadataURI)` of the AVS, emitted by EigenLayer's AVSDirectory and, for operator-set AVSs, by
its AllocationManager (the same event): the newest of both wins. A field staff edited
(`Avs.staff_edited_fields`, see lats/curation.py) is never overwritten.
"""

from __future__ import annotations

import urllib.parse
from typing import Any

from django.conf import settings
from django.db import models, transaction

from chain.gateway import Gateway, gateway_for, scan_ranges
from chain.results import Block
from core.db import model_update
from lats.checks import check_chain, check_not_behind
from lats.metadata import metadata_fetch
from lats.models import Avs, Lat, SyncStatus
from lats.sync_status import sync_status_recording, sync_status_success

METADATA_FIELDS = {
    "name": "metadata_name",
    "description": "metadata_description",
    "website": "metadata_website",
    "logo": "metadata_logo",
    "twitter": "metadata_social",
    "discord": "metadata_community_chat",
    "telegram": "metadata_messaging",
    "github": "metadata_code",
}


_URL_FIELDS = {f for f in METADATA_FIELDS.values() if f != "metadata_name"} - {
    "metadata_description"
}


def _document_value(field: str, value: Any) -> str | None:
    """A document's value as the field stores it: text trimmed to the column; links only
    http(s) (a `javascript:` logo is not served)."""
    if not isinstance(value, str) or not value.strip():
        return None
    value = value.strip()
    if field in _URL_FIELDS:
        scheme = urllib.parse.urlsplit(value).scheme.lower()
        max_length = _max_length(field)
        if scheme not in {"http", "https"} or (max_length is not None and len(value) > max_length):
            return None
        return value
    return value[: _max_length(field)]


def _max_length(field: str) -> int | None:
    column = Avs._meta.get_field(field)
    return column.max_length if isinstance(column, models.Field) else None


@transaction.atomic
def avs_apply_metadata(*, avs: Avs, uri: str, document: dict[str, Any], block: int) -> list[str]:
    """Seed curated fields from the document, leaving what staff edited alone. A member the
    document no longer has is cleared (unless staff edited it)."""
    locked = Avs.objects.select_for_update().get(pk=avs.pk)  # against a concurrent staff edit
    values: dict[str, Any] = {"metadata_uri": uri, "metadata_updated_block": block}
    for key, field in METADATA_FIELDS.items():
        if field not in locked.staff_edited_fields:
            values[field] = _document_value(field, document.get(key))
    changed = model_update(locked, values)
    for field in changed:
        setattr(avs, field, getattr(locked, field))
    return changed


def metadata_sources(lat: Lat) -> list[str]:
    """The contracts whose AVSMetadataURIUpdated events name the AVS's metadata document:
    its chain's AVSDirectory and AllocationManager, where known (an override or a preset)."""
    sources = (lat.core_contract("avsDirectory"), lat.core_contract("allocationManager"))
    return list(dict.fromkeys(address for address in sources if address))


def avs_refresh_metadata(*, lat: Lat, gateway: Gateway | None = None) -> bool:
    """Seed the LAT's AVS metadata from its latest AVSMetadataURIUpdated event of the
    AVSDirectory or the AllocationManager (read in ranges of at most LOG_BLOCK_RANGE blocks).
    A node on another chain fails the refresh, one whose head is below the stored event's
    block skips it; any failure is recorded. Where neither contract is known, nothing is
    read (the AVS's metadata stays null unless staff curate it)."""
    sources = metadata_sources(lat)
    if not sources:
        return False
    avs = lat.avs
    with sync_status_recording(lat=lat, job=SyncStatus.Job.METADATA):
        gateway = gateway or gateway_for(lat.chain_id)
        check_chain(lat=lat, gateway=gateway)
        head = gateway.head()
        check_not_behind(head, avs.metadata_updated_block, "the block of the stored metadata")
        latest = _latest_metadata_event(lat, gateway, head, sources)
        changed: list[str] = []
        if latest is not None and (
            latest.values[1] != avs.metadata_uri
            or avs.metadata_updated_block != latest.block_number
        ):
            uri = latest.values[1]
            document = metadata_fetch(uri)
            changed = avs_apply_metadata(
                avs=avs, uri=uri, document=document, block=latest.block_number
            )
    sync_status_success(lat=lat, job=SyncStatus.Job.METADATA, block=head.number)
    return bool(changed)


def _latest_metadata_event(lat: Lat, gateway: Gateway, head: Block, sources: list[str]):
    avs = lat.avs
    topic = "0x" + "0" * 24 + avs.address[2:].lower()

    def fetch(first: int, last: int):
        # The AllocationManager's event has the AVSDirectory's signature: one ABI, one read.
        return gateway.event_logs(
            contract="AVSDirectory",
            name="AVSMetadataURIUpdated",
            address=sources[0] if len(sources) == 1 else sources,
            topics=[topic],
            from_block=first,
            to_block=last,
        )

    latest = None
    start = avs.metadata_updated_block or lat.deployment_block
    for _, _, logs in scan_ranges(
        fetch, start=start, end=head.number, max_range=settings.LOG_BLOCK_RANGE
    ):
        for log in logs:
            if latest is None or (log.block_number, log.log_index) > (
                latest.block_number,
                latest.log_index,
            ):
                latest = log
    return latest
