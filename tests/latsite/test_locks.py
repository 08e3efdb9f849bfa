"""The advisory lock of the refresh jobs (core/locks.py): one holder per (name, ids) across
database connections, released when the block ends or raises; the cache lock off PostgreSQL."""

from __future__ import annotations

import pytest
from django.db import connections

from core.locks import _cache_lock, advisory_lock, lock_key, session_alias
from tests.lockholder import Holder

pytestmark = pytest.mark.django_db


def acquired_elsewhere(name: str, *ids: object) -> bool:
    """Whether another connection (another thread's) gets the lock right now."""
    with Holder(name, *ids) as holder:
        return bool(holder.acquired)


def test_lock_key_depends_on_name_and_ids():
    assert lock_key("job", 1) == lock_key("job", 1)
    keys = {lock_key("job", 1), lock_key("job", 2), lock_key("other", 1), lock_key("job", 1, 2)}
    assert len(keys) == 4
    assert all(-(2**63) <= key < 2**63 for key in keys)


def test_second_holder_on_another_connection_is_refused():
    with advisory_lock("job", 7) as acquired:
        assert acquired is True
        # held by this thread's session (the database's own where DATABASE_URL is a pooler)
        with connections[session_alias()].cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted "
                "AND pid = pg_backend_pid()"
            )
            assert cursor.fetchone()[0] == 1
        assert acquired_elsewhere("job", 7) is False
        assert acquired_elsewhere("job", 8) is True  # another LAT
        assert acquired_elsewhere("other-job", 7) is True  # another job
    assert acquired_elsewhere("job", 7) is True  # released


def test_lock_is_released_when_the_block_raises():
    with pytest.raises(RuntimeError), advisory_lock("job", 9):
        raise RuntimeError("boom")
    assert acquired_elsewhere("job", 9) is True


def test_holder_elsewhere_keeps_this_connection_out():
    with Holder("job", 10) as holder:
        assert holder.acquired is True
        with advisory_lock("job", 10) as acquired:
            assert acquired is False
    with advisory_lock("job", 10) as acquired:
        assert acquired is True


def test_cache_lock_used_off_postgresql():
    key = lock_key("cache-job", 1)
    with _cache_lock(key) as first:
        with _cache_lock(key) as second:
            assert (first, second) == (True, False)
    with _cache_lock(key) as again:
        assert again is True
