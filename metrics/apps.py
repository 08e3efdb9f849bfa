from django.apps import AppConfig


class MetricsConfig(AppConfig):
    name = "metrics"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.db.models.signals import post_delete, post_save

        from core.api.documents import documents_changed

        # Cache invalidation, not logic: the history and the APYs are read from these, and the
        # read endpoints' ETags follow the same generation (core/api/conditional.py).
        for model in ("MetricSnapshot", "RewardSubmission", "UsdPrice"):
            for signal in (post_save, post_delete):
                signal.connect(
                    documents_changed,
                    sender=f"metrics.{model}",
                    dispatch_uid=f"documents_changed.{model}.{signal}",
                )
