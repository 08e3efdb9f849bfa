from django.apps import AppConfig


class WebhooksConfig(AppConfig):
    name = "webhooks"
    default_auto_field = "django.db.models.BigAutoField"
    verbose_name = "Webhooks"

    def ready(self) -> None:
        # The outbox is written in the indexing transaction (activity/indexer.py), which the
        # floors keep from importing this package: it is handed the outbox's writer here.
        from activity import indexer
        from webhooks import checks, outbox  # noqa: F401 (checks registers the system checks)

        indexer.listen(outbox.INDEX_LISTENER)
