"""Writes of curated AVS metadata by people (staff in admin), as opposed to the metadata refresh.

A curated field that staff set is recorded in `Avs.staff_edited_fields`; the metadata refresh
(`lats.avs_metadata.avs_apply_metadata`) never overwrites such a field. Releasing a field hands it
back to the AVS's metadata document: the next metadata refresh re-applies the document.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db import transaction

from lats.models import Avs, Lat


def _locked(avs: Avs) -> Avs:
    """The row, locked: concurrent edits of other fields must not lose each other's marks."""
    return Avs.objects.select_for_update().only("id", "staff_edited_fields").get(pk=avs.pk)


@transaction.atomic
def avs_update_curated(*, avs: Avs, changes: dict[str, Any], by_staff: bool) -> list[str]:
    """Set curated fields; when `by_staff`, mark them staff-edited. Returns the fields set."""
    unknown = sorted(set(changes) - set(Avs.CURATED_FIELDS))
    if unknown:
        raise ValueError(f"not curated fields of an AVS: {', '.join(unknown)}")
    if not changes:
        return []
    current = _locked(avs)
    edited = list(current.staff_edited_fields)
    if by_staff:
        edited += [
            field for field in Avs.CURATED_FIELDS if field in changes and field not in edited
        ]
    for field, value in changes.items():
        setattr(avs, field, value)
    avs.staff_edited_fields = edited
    avs.save(update_fields=[*changes, "staff_edited_fields"])
    return [field for field in Avs.CURATED_FIELDS if field in changes]


@transaction.atomic
def avs_release_curated(*, avs: Avs, fields: Iterable[str] | None = None) -> list[str]:
    """Hand staff-edited fields (all when `fields` is None) back to the metadata document.

    The values stay until the next metadata refresh, which re-applies the latest document to
    every field no longer marked (the document's block is forgotten so that the refresh does
    not skip an unchanged document). Returns the fields released.
    """
    current = _locked(avs)
    edited = list(current.staff_edited_fields)
    wanted = set(edited) if fields is None else set(fields)
    released = [field for field in edited if field in wanted]
    if not released:
        return []
    avs.staff_edited_fields = [field for field in edited if field not in wanted]
    avs.metadata_updated_block = None
    avs.save(update_fields=["staff_edited_fields", "metadata_updated_block"])
    return released


def avs_metadata_lat_ids(avs_ids: list[int]) -> list[int]:
    """One LAT of each AVS whose metadata can be read (its AVSDirectory or
    AllocationManager known: an override or a preset): the metadata
    refresh of an AVS runs through one of its LATs."""
    lats = Lat.objects.filter(avs_id__in=avs_ids).order_by("avs_id", "id")
    one_per_avs: dict[int, int] = {}
    for lat in lats.only("id", "avs_id", "chain_id", "avs_directory", "allocation_manager"):
        if lat.core_contract("avsDirectory") or lat.core_contract("allocationManager"):
            one_per_avs.setdefault(lat.avs_id, lat.id)
    return list(one_per_avs.values())
