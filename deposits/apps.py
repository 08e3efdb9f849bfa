from django.apps import AppConfig


class DepositsConfig(AppConfig):
    name = "deposits"
    default_auto_field = "django.db.models.BigAutoField"
