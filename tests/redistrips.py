"""The round trips the service makes to Redis, recorded: a pipeline as one, a command as its
name."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest


@contextlib.contextmanager
def redis_trips() -> Iterator[list[str]]:
    """The round trips to Redis made inside the block, in order ("pipeline", or the command)."""
    import redis

    trips: list[str] = []
    pipeline_execute, execute_command = redis.client.Pipeline.execute, redis.Redis.execute_command

    def pipeline(self, *args, **kwargs):
        trips.append("pipeline")
        return pipeline_execute(self, *args, **kwargs)

    def command(self, *args, **kwargs):
        trips.append(str(args[0]))
        return execute_command(self, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(redis.client.Pipeline, "execute", pipeline)
        patch.setattr(redis.Redis, "execute_command", command)
        yield trips
