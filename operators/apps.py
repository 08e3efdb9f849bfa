from django.apps import AppConfig


class OperatorsConfig(AppConfig):
    name = "operators"
    default_auto_field = "django.db.models.BigAutoField"
