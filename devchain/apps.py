from django.apps import AppConfig


class DevchainConfig(AppConfig):
    """Only for its management command, lat_devnet; no models."""

    verbose_name = "Local chain"
    name = "devchain"
