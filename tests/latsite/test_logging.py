"""Logs: the X-Request-ID header on every answer and on the log lines of its request and of the
tasks it enqueues, plain and JSON lines, node URLs never logged, Sentry only when configured."""

from __future__ import annotations

import io
import json
import logging
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from celery import signals
from django.test import Client

from core.logs import (
    current_request_id,
    logging_config,
    redact,
    sentry_before_breadcrumb,
    sentry_before_send,
)
from latsite.celery import app as celery_app
from tests.logviews import NODE_URL, QUEUE, echo_request_id

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]
MADE = re.compile(r"[0-9a-f]{32}")
KEY, PASSWORD = "sekr3t-provider-key", "pa55word"


@pytest.fixture
def log_urls(settings) -> None:
    settings.ROOT_URLCONF = "tests.logviews"
    settings.RPC_URL = NODE_URL


@pytest.fixture
def console() -> Iterator[io.StringIO]:
    """What the configured console handler writes (filters and format as in production)."""
    (handler,) = [h for h in logging.getLogger().handlers if h.get_name() == "console"]
    assert isinstance(handler, logging.StreamHandler)
    buffer = io.StringIO()
    previous = handler.setStream(buffer)
    yield buffer
    handler.setStream(previous)


@pytest.fixture
def failing_client() -> Client:
    return Client(raise_request_exception=False)


# --- the header -------------------------------------------------------------------------------


def test_an_answer_without_a_caller_id_gets_a_new_one(api, dataset):
    first, second = api.get("/lat"), api.get("/lat")
    assert first.status_code == 200
    assert MADE.fullmatch(first["X-Request-ID"])
    assert MADE.fullmatch(second["X-Request-ID"])
    assert first["X-Request-ID"] != second["X-Request-ID"]


@pytest.mark.parametrize(
    "path", ["/lat", "/lat/0x0000000000000000000000000000000000000bad", "/nowhere", "/health"]
)
def test_the_caller_id_comes_back_on_answers_and_errors(api, dataset, path):
    response = api.get(path, headers={"X-Request-ID": "caller-id_1.2:3"})
    assert response["X-Request-ID"] == "caller-id_1.2:3"


def test_admin_and_a_refused_method_carry_it_too(api, db):
    login = api.get("/admin/login/", headers={"X-Request-ID": "admin-1"})
    assert login.status_code == 200
    assert login["X-Request-ID"] == "admin-1"
    refused = api.delete("/lat", headers={"X-Request-ID": "method-1"})
    assert refused.status_code == 405
    assert refused["X-Request-ID"] == "method-1"


@pytest.mark.parametrize(
    "raw", ["x" * 201, "has space", "tab\there", "caf\u00e9", "bell\x07", ""], ids=repr
)
def test_an_insane_caller_id_is_replaced(api, dataset, raw):
    response = api.get("/lat", headers={"X-Request-ID": raw})
    assert MADE.fullmatch(response["X-Request-ID"])


def test_the_longest_accepted_id_is_200_characters(api, dataset):
    raw = "a" * 200
    assert api.get("/lat", headers={"X-Request-ID": raw})["X-Request-ID"] == raw


def test_browsers_may_read_it(api, dataset):
    response = api.get("/lat", headers={"Origin": "https://wallet.example"})
    assert "x-request-id" in response["Access-Control-Expose-Headers"].lower()


# --- log lines --------------------------------------------------------------------------------


def test_log_lines_of_a_request_carry_its_id_and_no_node_url(client, log_urls, console):
    response = client.get("/test-logs/logs", headers={"X-Request-ID": "plain-req-1"})
    assert response.json() == {"requestId": "plain-req-1"}
    logging.getLogger("tests.outside").warning("outside any request")
    lines = console.getvalue().splitlines()
    (asking,) = [line for line in lines if "asking" in line]
    assert asking.endswith("INFO tests.logviews [plain-req-1] asking http://127.0.0.1:9/[redacted]")
    assert any(line.endswith("[-] outside any request") for line in lines)
    assert current_request_id() == "-"


def test_an_exception_with_a_node_url_is_logged_redacted(failing_client, log_urls, console):
    """requests' own error quotes the path (`url: /v3/<key>`) without the host."""
    response = failing_client.get("/test-logs/fails", headers={"X-Request-ID": "plain-req-2"})
    assert response.status_code == 500
    assert response.json()["error"]["code"] == "internal_server_error"
    assert response["X-Request-ID"] == "plain-req-2"
    text = console.getvalue()
    assert "ERROR django.request [plain-req-2] Internal Server Error: /test-logs/fails" in text
    assert "ConnectionError" in text
    assert "Max retries exceeded with url: [redacted]" in text
    assert KEY not in text
    assert PASSWORD not in text


def run_manage(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=os.environ | env,
        check=False,
        timeout=120,
    )


_JSON_SCRIPT = """
from django.test import Client, override_settings
with override_settings(ROOT_URLCONF="tests.logviews"):
    client = Client(raise_request_exception=False)
    client.get("/test-logs/logs", headers={"X-Request-ID": "json-req-1"})
    client.get("/test-logs/fails", headers={"X-Request-ID": "json-req-2"})
"""


def test_json_lines_when_log_format_is_json():
    env = {"LOG_FORMAT": "json", "RPC_URL": NODE_URL, "ALLOWED_HOSTS": "testserver"}
    result = run_manage("shell", "-c", _JSON_SCRIPT, env=env)
    assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in result.stderr.splitlines() if line.startswith("{")]
    assert records, result.stderr
    assert {"time", "level", "logger", "request_id", "message"} <= set(records[0])
    (asking,) = [r for r in records if r["logger"] == "tests.logviews"]
    assert asking["request_id"] == "json-req-1"
    assert asking["message"] == "asking http://127.0.0.1:9/[redacted]"
    failures = [r for r in records if r["logger"] == "django.request"]
    assert {(r["level"], r["request_id"]) for r in failures} == {("ERROR", "json-req-2")}
    (failed,) = [r for r in failures if "exc_info" in r]
    assert "Max retries exceeded with url: [redacted]" in failed["exc_info"]
    assert KEY not in result.stderr + result.stdout
    assert PASSWORD not in result.stderr + result.stdout


def test_an_unknown_log_format_refuses_to_start():
    result = run_manage("check", env={"LOG_FORMAT": "xml"})
    assert result.returncode != 0
    assert "ImproperlyConfigured: LOG_FORMAT must be one of plain, json, not 'xml'" in result.stderr
    with pytest.raises(Exception, match="LOG_FORMAT"):
        logging_config("yaml", "INFO")


def test_redaction_keeps_scheme_and_host_of_every_url():
    text = (
        "a https://user:pw@eth.example:8443/v2/key?x=1 b wss://ws.example/key "
        "c https://plain.example/ d http://127.0.0.1:8545, e (url='https://h.example/k')"
    )
    assert redact(text, []) == (
        "a https://eth.example:8443/[redacted] b wss://ws.example/[redacted] "
        "c https://plain.example/ d http://127.0.0.1:8545, e (url='https://h.example/[redacted]')"
    )


# --- Celery -----------------------------------------------------------------------------------


@pytest.fixture
def published() -> Iterator[list[dict]]:
    """The headers of every task message published during the test."""
    seen: list[dict] = []

    def capture(headers=None, **_):
        seen.append(dict(headers or {}))

    signals.before_task_publish.connect(capture, weak=False, dispatch_uid="test-logging")
    yield seen
    signals.before_task_publish.disconnect(dispatch_uid="test-logging")


def test_the_tasks_a_request_enqueues_carry_its_id(client, log_urls, published):
    """Published through the real broker (Redis), read back from the queue, then run as the
    worker would run that message: under the request's id, which is gone afterwards."""
    with celery_app.connection_for_write() as connection:
        queue = connection.SimpleQueue(QUEUE)
        queue.clear()
        try:
            response = client.get("/test-logs/enqueues", headers={"X-Request-ID": "celery-req-1"})
            message = queue.get(timeout=5)
            message.ack()
        finally:
            queue.clear()
            queue.close()
    assert [h["lat_request_id"] for h in published] == ["celery-req-1"]
    assert message.headers["id"] == response.json()["taskId"]
    assert message.headers["lat_request_id"] == "celery-req-1"
    ran = echo_request_id.apply(task_id=message.headers["id"], headers=message.headers)
    assert ran.get() == "celery-req-1"
    assert current_request_id() == "-"


def test_a_task_published_outside_a_request_runs_under_an_id_of_its_own(published):
    ran = echo_request_id.apply()
    assert MADE.fullmatch(ran.get())
    assert current_request_id() == "-"


def test_an_insane_carried_id_is_not_trusted():
    ran = echo_request_id.apply(headers={"lat_request_id": "bad id\n"})
    assert MADE.fullmatch(ran.get())


# --- Sentry -----------------------------------------------------------------------------------


_SENTRY_SCRIPT = """
import sentry_sdk
client = sentry_sdk.get_client()
options = client.options
print("active:", client.is_active(), options["send_default_pii"], options["environment"])
print("integrations:", sorted(client.integrations))
"""


def test_sentry_starts_only_with_a_dsn():
    dsn = {"SENTRY_DSN": "http://public@127.0.0.1:9/1", "SENTRY_ENVIRONMENT": "ci"}
    result = run_manage("shell", "-c", _SENTRY_SCRIPT, env=dsn)
    assert result.returncode == 0, result.stderr
    assert "active: True False ci" in result.stdout.splitlines()
    (integrations,) = [line for line in result.stdout.splitlines() if "integrations:" in line]
    assert "'celery'" in integrations
    assert "'django'" in integrations
    without = run_manage("shell", "-c", _SENTRY_SCRIPT, env={"SENTRY_DSN": ""})
    assert without.returncode == 0, without.stderr
    assert any(line.startswith("active: False") for line in without.stdout.splitlines())


def test_sentry_events_and_breadcrumbs_are_redacted(settings):
    settings.RPC_URL = NODE_URL
    event = {
        "exception": {
            "values": [{"type": "ConnectionError", "value": f"url: /v3/{KEY} ({NODE_URL})"}]
        },
        "extra": {"urls": [NODE_URL, "https://rpc.example/v2/other-key"]},
    }
    sent = json.dumps(sentry_before_send(event, {}))
    assert KEY not in sent
    assert PASSWORD not in sent
    assert "other-key" not in sent
    assert "https://rpc.example/[redacted]" in sent
    crumb = {"category": "httplib", "data": {"url": NODE_URL}}
    assert sentry_before_breadcrumb(crumb, {}) == {
        "category": "httplib",
        "data": {"url": "http://127.0.0.1:9/[redacted]"},
    }
