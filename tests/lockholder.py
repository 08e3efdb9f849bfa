"""A lock held elsewhere: advisory_lock taken on another thread's database connection."""

from __future__ import annotations

import threading

from django.db import connection

from core.locks import advisory_lock


class Holder(threading.Thread):
    """Holds advisory_lock(name, *ids) on the thread's own database connection until told."""

    def __init__(self, name: str, *ids: object) -> None:
        super().__init__(daemon=True)
        self.key = (name, *ids)
        self.acquired: bool | None = None
        self.holding = threading.Event()
        self.release = threading.Event()

    def run(self) -> None:
        try:
            with advisory_lock(*self.key) as acquired:
                self.acquired = acquired
                self.holding.set()
                self.release.wait(30)
        finally:
            self.holding.set()
            connection.close()  # this thread's connection

    def __enter__(self) -> Holder:
        self.start()
        assert self.holding.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        self.release.set()
        self.join(10)
