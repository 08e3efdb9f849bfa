from django.apps import AppConfig


class StreamConfig(AppConfig):
    name = "stream"
    verbose_name = "Live stream"
