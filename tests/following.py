"""A follower running on a thread of its own in a test (tests/latsite/test_follow.py and
tests/e2e/test_freshness.py)."""

from __future__ import annotations

import threading

from django.db import connection

from sync.follow import Follower


class Running:
    """A follower's `run` on a thread of its own, stopped on exit; an exception the thread
    raised is kept in `error` for the test to report."""

    def __init__(self, follower: Follower, *, join_seconds: float = 60) -> None:
        self.follower = follower
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.join_seconds = join_seconds
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            self.follower.run(self.stop)
        except BaseException as exc:  # reported by the test, not lost on the thread
            self.error = exc
            raise
        finally:
            connection.close()  # this thread's connection

    def __enter__(self) -> Follower:
        self.thread.start()
        return self.follower

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(self.join_seconds)
        assert not self.thread.is_alive()
