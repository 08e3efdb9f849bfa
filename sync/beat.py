"""The beat's scheduler: django-celery-beat's DatabaseScheduler (the schedules ops set in admin),
scheduling only while it holds the `celery_beat` role (core/leadership.py), so that two beat
processes (one per host) enqueue each job once per tick: the other stands by, tries the role
every STANDBY_SECONDS, and takes it within FOLLOWER_LEASE_SECONDS of the holder stopping,
dying or freezing. A holder that wakes from a freeze publishes nothing more: it publishes only
while its role is confirmed by its own clock (its database writes, the schedules' last runs,
are not fenced: django-celery-beat opens connections as it likes). A beat that stood by drops
the last runs it had not written yet and, when it schedules again, reads the schedules afresh:
the other beat's runs meanwhile count, and none of its own older ones is written over them."""

from __future__ import annotations

import contextlib
import logging
from typing import Any

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections
from django_celery_beat.schedulers import DatabaseScheduler

from core.leadership import Leadership, LeadershipLost, leadership

logger = logging.getLogger(__name__)

BEAT_ROLE = "celery_beat"
STANDBY_SECONDS = 1.0


class SingleBeatScheduler(DatabaseScheduler):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._role: contextlib.ExitStack | None = None
        self._held: Leadership | None = None
        super().__init__(*args, **kwargs)

    def _holding(self) -> bool:
        if self._held is not None and not self._held.confirmed():
            self._stand_by("its role is no longer confirmed")
        if self._held is None:
            stack = contextlib.ExitStack()
            held = stack.enter_context(
                leadership(BEAT_ROLE, lease=settings.FOLLOWER_LEASE_SECONDS, fence=False)
            )
            if held is None:
                stack.close()
                return False
            logger.info("this beat schedules (it holds the %s role)", BEAT_ROLE)
            self._role, self._held = stack, held
        return True

    def _stand_by(self, why: str) -> None:
        logger.warning("this beat stands by: %s", why)
        role, self._role, self._held = self._role, None, None
        self._heap = None  # rebuilt when it schedules again (a due entry may have been popped)
        # The other beat schedules meanwhile: the last runs this one did not write yet are no
        # longer its to write (they would go over the other's), and when it schedules again it
        # reads every schedule from the database, with the other's last runs.
        self._dirty.clear()
        self._initial_read = True
        if role is not None:
            with contextlib.suppress(Exception):
                role.close()
        connections[DEFAULT_DB_ALIAS].close()

    def tick(self, *args: Any, **kwargs: Any) -> float:
        try:
            if not self._holding():
                return min(STANDBY_SECONDS, self.max_interval)
            return super().tick(*args, **kwargs)
        except LeadershipLost as exc:
            self._stand_by(str(exc))
            return STANDBY_SECONDS

    def apply_async(self, entry: Any, producer: Any = None, advance: bool = True, **kwargs: Any):
        if self._held is None or not self._held.confirmed():
            raise LeadershipLost("the role is not confirmed: nothing is published")
        return super().apply_async(entry, producer=producer, advance=advance, **kwargs)

    def close(self) -> None:
        try:
            super().close()
        finally:
            if self._role is not None:
                self._role.close()
                self._role = self._held = None
