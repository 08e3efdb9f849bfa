import os

from celery import Celery

from core.logs import connect_celery_signals

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "latsite.settings")

app = Celery("latsite")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
# The request id of the request (or task) that enqueues a task goes with it (core/logs.py).
connect_celery_signals()
