"""The ASGI application: the stream process (the Procfile's `stream`) and the demo's server.
Django serves every request; `GET /stream/events` streams from here (stream/asgi.py)."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "latsite.settings")

django_application = get_asgi_application()

from stream.asgi import StreamApplication  # noqa: E402 (after Django is set up)

application = StreamApplication(django_application)
