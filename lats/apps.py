from django.apps import AppConfig


class LatsConfig(AppConfig):
    verbose_name = "LATs"
    name = "lats"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.db.models.signals import post_delete, post_save

        from core.api.documents import documents_changed

        # Cache invalidation, not logic: any write to what the cached read documents are
        # built from makes them stale (admin edits, refresh jobs, imports alike).
        for model in ("Lat", "LatToken", "Token", "Avs", "FeeStructure", "PriceFeed"):
            for signal in (post_save, post_delete):
                signal.connect(
                    documents_changed,
                    sender=f"lats.{model}",
                    dispatch_uid=f"documents_changed.{model}.{signal}",
                )
        for model in ("StakerNode", "NodeAsset", "Operator", "OperatorAvsSplit"):
            for signal in (post_save, post_delete):
                signal.connect(
                    documents_changed,
                    sender=f"operators.{model}",
                    dispatch_uid=f"documents_changed.{model}.{signal}",
                )
