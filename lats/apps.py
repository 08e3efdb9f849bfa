from django.apps import AppConfig
from django.db.models.signals import post_migrate


class LatsConfig(AppConfig):
    verbose_name = "LATs"
    name = "lats"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from latsite.schedules import ensure_default_schedules_after_migrate

        # Default refresh schedules: created after every migrate, never overwritten.
        post_migrate.connect(
            ensure_default_schedules_after_migrate,
            sender=self,
            dispatch_uid="lats.ensure_default_schedules",
        )
