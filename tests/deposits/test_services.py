from __future__ import annotations

import pytest

from deposits.models import Deposit
from deposits.services import deposit_record_events, deposit_remove_from_block
from tests.factories import event

pytestmark = pytest.mark.django_db


def listing() -> list[tuple[int, int, int]]:
    return list(Deposit.objects.order_by("seq").values_list("seq", "block_number", "log_index"))


def test_seq_is_dense_rank_of_block_and_log(dataset):
    deposit_record_events(lat=dataset.eth_lat, events=[event(5, 1), event(5, 0), event(7, 0)])
    deposit_record_events(lat=dataset.native_lat, events=[event(6, 3), event(8, 0)])
    assert listing() == [(1, 5, 0), (2, 5, 1), (3, 6, 3), (4, 7, 0), (5, 8, 0)]


def test_reorg_removal_renumbers(dataset):
    deposit_record_events(lat=dataset.eth_lat, events=[event(5, 0), event(7, 0), event(9, 0)])
    deposit_record_events(lat=dataset.native_lat, events=[event(6, 0), event(8, 0)])
    assert deposit_remove_from_block(lat=dataset.eth_lat, block_number=7) == 2
    assert listing() == [(1, 5, 0), (2, 6, 0), (3, 8, 0)]
    deposit_record_events(lat=dataset.eth_lat, events=[event(7, 1), event(10, 0)])
    assert listing() == [(1, 5, 0), (2, 6, 0), (3, 7, 1), (4, 8, 0), (5, 10, 0)]
