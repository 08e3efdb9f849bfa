"""The dispatcher process as the Procfile runs it (its loop in a thread here): a committed
outbox row wakes it through PostgreSQL's NOTIFY, well before its poll, and its first attempt
starts within the push freshness promise (2 s)."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection, transaction

from tests.webhooks.conftest import register
from webhooks.dispatcher import Dispatcher
from webhooks.models import OutboxEvent
from webhooks.outbox import outbox_status_changed

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_commit_wakes_the_dispatcher_at_once(keyed, receiver, settings, dataset):
    assert connection.vendor == "postgresql"
    settings.WEBHOOK_POLL_SECONDS = 30  # only the NOTIFY can wake it in time
    server = receiver()
    register(keyed, server.url())
    stop = threading.Event()
    dispatcher = Dispatcher(workers=2, per_endpoint=2)
    thread = threading.Thread(target=dispatcher.run, args=(stop,), daemon=True)
    thread.start()
    try:
        time.sleep(0.5)  # listening, idle
        with transaction.atomic():
            outbox_status_changed(
                lat=dataset.eth_lat, paused=True, prices_stale=False, state_block=7
            )
        committed = time.monotonic()
        deadline = committed + 10
        while not server.received and time.monotonic() < deadline:
            time.sleep(0.01)
        assert server.received, "nothing delivered"
        # The push freshness promise; the poll alone would take 30 s.
        assert server.received[0].at - committed < 2.0
        assert server.received[0].id == OutboxEvent.objects.get().event_id
    finally:
        stop.set()
        thread.join(10)
    assert not thread.is_alive()
