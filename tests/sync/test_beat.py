"""The beat's scheduler (sync/beat.py) after it stood by: when it schedules again it reads the
schedules from the database, so that a job the other beat ran meanwhile is not published again
at once from its own older view, and none of its own older last runs is written over the
other's. In process, on the real broker (a Redis database of the test worker's own) and the
test database; the other beat is played by writing its last run as django-celery-beat does."""

from __future__ import annotations

import json
import time

import pytest
import redis
from celery import Celery
from django.utils import timezone
from django_celery_beat.models import PeriodicTask

from sync.beat import SingleBeatScheduler
from sync.schedules import DEFAULT_SCHEDULES, ensure_default_schedules
from tests.e2e.test_celery import broker_url, every

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.xdist_group("celery")]

JOB, INTERVAL = "lat-deposit-indexing", 2


def published(queue: redis.Redis, task: str) -> int:
    messages = [json.loads(raw) for raw in queue.lrange("celery", 0, -1)]
    return sum(message["headers"]["task"] == task for message in messages)


def test_a_beat_that_stood_by_schedules_from_the_database_again(worker_id):
    ensure_default_schedules()
    for task in PeriodicTask.objects.filter(name__in=[d.name for d in DEFAULT_SCHEDULES]):
        task.enabled = task.name == JOB
        if task.enabled:
            task.interval, task.last_run_at = every(INTERVAL), None  # due at once
        task.save()
    name = PeriodicTask.objects.get(name=JOB).task
    app = Celery("beat-test", broker=broker_url(worker_id))
    queue = redis.Redis.from_url(broker_url(worker_id))
    queue.delete("celery")
    beat = SingleBeatScheduler(app=app, max_interval=1)
    try:
        deadline = time.monotonic() + INTERVAL + 3
        while not published(queue, name) and time.monotonic() < deadline:
            time.sleep(max(0.0, min(beat.tick(), 0.1)))  # takes the role; due an interval on
        assert published(queue, name) == 1
        beat._stand_by("the other beat holds the role")
        # The other beat schedules: once the job is due again by this beat's view, it runs it
        # and writes its last run, as django-celery-beat does (no schedule change signalled).
        time.sleep(INTERVAL + 0.2)
        ran = timezone.now()
        task = PeriodicTask.objects.get(name=JOB)
        task.last_run_at, task.total_run_count = ran, 7
        task.no_changes = True
        task.save()

        for _ in range(3):  # takes the role again: the job ran a moment ago, it is not due
            beat.tick()
        assert published(queue, name) == 1
        task.refresh_from_db()
        assert (task.last_run_at, task.total_run_count) == (ran, 7)  # nothing written over it
    finally:
        beat.close()
        queue.delete("celery")
        queue.close()
