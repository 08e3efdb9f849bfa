"""The test database migrated back and forth, for the tests of what migrations do to stored
rows (run them with `transaction=True`, in the `migrations` xdist group)."""

from __future__ import annotations

from django.apps.registry import Apps
from django.db import connection
from django.db.migrations.executor import MigrationExecutor


def migrate(targets: list[tuple[str, str]]) -> Apps:
    """Migrate to `targets`; the models as they are there."""
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


def leaves() -> list[tuple[str, str]]:
    """Every app's latest migration."""
    return MigrationExecutor(connection).loader.graph.leaf_nodes()
