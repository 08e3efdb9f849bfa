"""A URLconf for the logging tests (tests/latsite/test_logging.py): the project's URLs plus views
that log, fail with a node URL in their error, and enqueue a task, and that task."""

from __future__ import annotations

import logging

import requests
from django.http import HttpRequest, JsonResponse
from django.urls import include, path

from core.logs import current_request_id
from latsite.celery import app

logger = logging.getLogger("tests.logviews")

# A node URL with a provider key in its path and credentials, on a port where nothing listens.
NODE_URL = "http://ops:pa55word@127.0.0.1:9/v3/sekr3t-provider-key"
# The queue the enqueue view publishes to: read back by the test, consumed by no worker.
QUEUE = "lat-tests-logging"


@app.task(name="tests.logviews.echo_request_id")
def echo_request_id() -> str:
    logger.info("task runs")
    return current_request_id()


def logs(request: HttpRequest) -> JsonResponse:
    logger.info("asking %s", NODE_URL)
    return JsonResponse({"requestId": current_request_id()})


def fails(request: HttpRequest) -> JsonResponse:
    requests.post(NODE_URL, json={"method": "eth_blockNumber"}, timeout=2)
    return JsonResponse({})


def enqueues(request: HttpRequest) -> JsonResponse:
    result = echo_request_id.apply_async(queue=QUEUE)
    return JsonResponse({"taskId": result.id})


urlpatterns = [
    path("test-logs/logs", logs),
    path("test-logs/fails", fails),
    path("test-logs/enqueues", enqueues),
    path("", include("latsite.urls")),
]
