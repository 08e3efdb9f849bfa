"""The live stream and the retention job (extensions.md, "Live stream" and "Webhooks,
Retention"), against the Procfile's stream process: a client resuming from before what the job
deleted gets one `reset` message, naming the oldest message still kept and where to re-read
from, and the server closes the stream; one resuming from after it gets every message since,
then the live ones, without a gap or a repeat; a cursor ahead of the feed is a 422."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.utils import timezone

from sync.tasks import prune_push_outbox
from tests.stream.test_stream import ids, write
from webhooks.models import OutboxEvent

pytestmark = pytest.mark.django_db(transaction=True)


def wait_closed(stream, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while not stream.closed and time.monotonic() < deadline:
        time.sleep(0.02)
    return stream.closed


def test_resuming_from_before_the_jobs_deletes_is_a_reset_and_from_after_no_gap(
    connect, dataset, settings
):
    settings.PUSH_RETENTION_DAYS = 30
    rows = [row.id for row in write(dataset, 10)]
    old = rows[:6]
    OutboxEvent.objects.filter(id__in=old).update(created_at=timezone.now() - timedelta(days=31))
    before = connect(f"cursor={rows[1]}")
    assert ids(before.wait(8)) == rows[2:]  # all there before the job runs
    before.close()  # 3 streams per address here

    assert prune_push_outbox()["deleted"] == 6
    assert sorted(OutboxEvent.objects.values_list("id", flat=True)) == rows[6:]

    # From before the deletes: one reset, then the server closes the stream.
    for query, headers in (
        ("", {"Last_Event_ID": str(rows[1])}),
        (f"cursor={rows[4]}", {}),
        ("cursor=0", {}),  # "everything": more than is kept
    ):
        stale = connect(query, **headers)
        assert stale.status == 200
        assert wait_closed(stale)
        (reset,) = stale.messages
        assert reset.event == "reset"
        assert reset.id == ""  # the client's cursor stays the one that expired
        assert reset.data["type"] == "reset"
        data = reset.data["data"]
        assert data["oldestId"] == rows[6]
        assert data["cursor"] == rows[5]
        assert data["listing"] == "/lat/{address}/events"
        assert "30 days" in data["message"]

    # From after them: everything since, once, then the live ones.
    after = connect(Last_Event_ID=str(rows[6]))
    replay = connect(f"cursor={rows[5]}")  # the reset's cursor: everything still kept
    time.sleep(0.3)
    live = [row.id for row in write(dataset, 2, first_block=20)]
    assert ids(after.wait(5)) == rows[7:] + live
    assert ids(replay.wait(6)) == rows[6:] + live
    time.sleep(1)
    assert ids(after.messages) == rows[7:] + live  # no repeat
    assert not after.closed
    replay.close()

    # A cursor ahead of the feed is refused.
    ahead = connect(f"cursor={live[-1] + 1000}")
    assert (ahead.status, ahead.body["error"]["code"]) == (422, "unprocessable_entity")
    assert "ahead" in ahead.body["error"]["message"]
    assert connect(f"cursor={live[-1]}").status == 200


def test_a_feed_whose_every_message_was_deleted_still_resets_old_cursors(
    connect, dataset, settings
):
    settings.PUSH_RETENTION_DAYS = 30
    rows = [row.id for row in write(dataset, 3)]
    OutboxEvent.objects.update(created_at=timezone.now() - timedelta(days=31))
    assert prune_push_outbox()["deleted"] == 3
    stale = connect(f"cursor={rows[0]}")
    assert wait_closed(stale)
    assert [m.event for m in stale.messages] == ["reset"]
    assert stale.messages[0].data["data"]["oldestId"] is None
    assert stale.messages[0].data["data"]["cursor"] == rows[-1]
    # The newest deleted id is no cursor ahead of the feed: nothing follows it yet.
    current = connect(f"cursor={rows[-1]}")
    assert current.status == 200
    time.sleep(0.3)
    (live,) = write(dataset, 1, first_block=50)
    assert ids(current.wait(1)) == [live.id]
