"""Settings of the bench's gunicorn: the service's own, with bench/urls.py as the URLconf."""

from latsite.settings import *  # noqa: F403

ROOT_URLCONF = "bench.urls"
