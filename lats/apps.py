from django.apps import AppConfig


class LatsConfig(AppConfig):
    verbose_name = "LATs"
    name = "lats"
    default_auto_field = "django.db.models.BigAutoField"
