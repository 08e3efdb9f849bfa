"""The names of the project's Celery tasks, and the way to enqueue them by name.

Ops' schedules (django-celery-beat rows) and the messages waiting in the broker store these
names, so they are a contract: they keep the modules the tasks were first defined in and never
change with the code's layout. The tasks themselves are defined in sync/tasks.py; code below it
(admin's "Refresh now") enqueues them by these names, importing nothing of sync.
"""

from __future__ import annotations

from celery import chain, current_app

# Per LAT (args: the LAT's id).
REFRESH_LAT_STATE = "lats.tasks.refresh_lat_state"
INDEX_DEPOSITS = "deposits.tasks.index_deposits"
RECORD_SNAPSHOT = "metrics.tasks.record_snapshot"
REFRESH_AVS_METADATA = "lats.tasks.refresh_avs_metadata"
# The fan-outs beat runs: one per-LAT task per LAT.
REFRESH_ALL_LAT_STATES = "lats.tasks.refresh_all_lat_states"
INDEX_ALL_DEPOSITS = "deposits.tasks.index_all_deposits"
RECORD_ALL_SNAPSHOTS = "metrics.tasks.record_all_snapshots"
REFRESH_ALL_AVS_METADATA = "lats.tasks.refresh_all_avs_metadata"
# Retention of push (webhooks/retention.py), run by beat: the feed's events; deliveries with
# their attempts and history.
PRUNE_PUSH_OUTBOX = "webhooks.tasks.prune_push_outbox"
PRUNE_PUSH_DELIVERIES = "webhooks.tasks.prune_push_deliveries"

# The steps "Refresh now" chains, each reading what the one before stored.
CHAINED = (REFRESH_LAT_STATE, INDEX_DEPOSITS, RECORD_SNAPSHOT)


def enqueue_refresh_now(lat_ids: list[int]) -> None:
    """Admin's "Refresh now": per LAT, the chained steps (a chain stops at a failure) and the
    AVS metadata beside them. Call through on_commit."""
    app = current_app
    for lat_id in lat_ids:
        chain(*(app.signature(name, args=(lat_id,), immutable=True) for name in CHAINED))()
        app.signature(REFRESH_AVS_METADATA, args=(lat_id,)).apply_async()


def enqueue_metadata_refresh(lat_ids: list[int]) -> None:
    """Refresh the AVS metadata through each of these LATs. Call through on_commit."""
    for lat_id in lat_ids:
        current_app.signature(REFRESH_AVS_METADATA, args=(lat_id,)).apply_async()
