from django.apps import AppConfig, apps
from django.db.models.signals import post_migrate


class SyncConfig(AppConfig):
    """The refresh pipeline, the job runner, every Celery task, the head follower and the
    commands that run jobs. No models."""

    name = "sync"

    def ready(self) -> None:
        from sync.schedules import ensure_default_schedules_after_migrate

        # Default refresh schedules: created after every migrate, never overwritten. Django
        # sends post_migrate for apps with models only: once, as the lats app's.
        post_migrate.connect(
            ensure_default_schedules_after_migrate,
            sender=apps.get_app_config("lats"),
            dispatch_uid="lats.ensure_default_schedules",
        )
