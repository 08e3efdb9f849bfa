"""Logs: the request id, the log formats, and the redaction of node URLs.

- The request id comes from the caller's `X-Request-ID` (when it is a sane token) or is made
  here; `RequestIdMiddleware` (core/middleware.py) keeps it in a context variable for the
  request and returns it in the `X-Request-ID` response header. `RequestIdFilter` writes it on
  every log record (`-` outside requests and tasks), and the Celery signal handlers below carry
  it in the headers of every task published while it is set, into the worker's logs.
- `LOG_FORMAT` picks the console format: `plain` lines or `json` lines (python-json-logger).
- Node URLs hold provider keys: `RedactUrlsFilter`, on the console handler, rewrites every
  http(s)/ws(s) URL in a message, its exception text and its stack to its scheme and host, and
  removes the configured RPC URLs (and their paths, which requests quotes on their own) wherever
  they appear. Sentry events pass through the same redaction (`sentry_before_send`).
"""

from __future__ import annotations

import logging
import re
import uuid
from contextvars import ContextVar, Token
from typing import TYPE_CHECKING, Any

from django.core.exceptions import ImproperlyConfigured
from pythonjsonlogger.json import JsonFormatter

if TYPE_CHECKING:
    from sentry_sdk.types import Breadcrumb, BreadcrumbHint, Event, Hint

HEADER = "X-Request-ID"
# The Celery message header that carries the request id to the worker.
TASK_HEADER = "lat_request_id"
NO_REQUEST = "-"
# Where the middleware also leaves the id on the request, for the records that carry it.
REQUEST_META_KEY = "lat.request_id"
MAX_LENGTH = 200
REDACTED = "[redacted]"
LOG_FORMATS = ("plain", "json")

_request_id: ContextVar[str] = ContextVar("request_id", default=NO_REQUEST)
# A sane caller-chosen id: 1 to 200 visible ASCII characters (no spaces, no control characters).
_TOKEN = re.compile(rf"[!-~]{{1,{MAX_LENGTH}}}")
# scheme, userinfo (optional), host[:port], then the rest up to a space or a quote.
_URL = re.compile(r"\b(https?|wss?)://([^\s/?#@'\"<>]*@)?([^\s/?#@'\"<>\\]+)([^\s'\"<>\\`]*)", re.I)


def new_request_id() -> str:
    return uuid.uuid4().hex


def accepted_request_id(raw: str | None) -> str:
    """The caller's id when it is a sane token, else a new one."""
    if raw is not None and _TOKEN.fullmatch(raw):
        return raw
    return new_request_id()


def current_request_id() -> str:
    return _request_id.get()


def bind_request_id(value: str) -> Token[str]:
    return _request_id.set(value)


def unbind_request_id(token: Token[str]) -> None:
    _request_id.reset(token)


class RequestIdFilter(logging.Filter):
    """Adds `request_id` to every record: the current request's or task's, `-` elsewhere."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "request_id"):
            current = _request_id.get()
            if current == NO_REQUEST:  # django.request logs 4xx/5xx after the middleware ran
                meta = getattr(getattr(record, "request", None), "META", None)
                if isinstance(meta, dict):
                    current = meta.get(REQUEST_META_KEY, NO_REQUEST)
            record.request_id = current
        return True


# Redaction ----------------------------------------------------------------------------------


def configured_urls() -> list[str]:
    """The node URLs in the settings (RPC_URL and RPC_URL_<chainId>), when settings are loaded."""
    from django.conf import settings

    if not settings.configured:
        return []
    urls = [getattr(settings, "RPC_URL", ""), *getattr(settings, "RPC_URLS", {}).values()]
    return [url for url in urls if url]


def _url_secrets(url: str) -> list[str]:
    """The parts of a configured URL that must never be logged: the URL, its userinfo and its
    path with query (requests' errors quote `url: /v3/<key>` without the host). Nothing for a URL
    of only a scheme and host (a local node); the whole value when it is no URL at all."""
    match = _URL.fullmatch(url)
    if match is None:
        return [url]
    userinfo, rest = match.group(2), match.group(4)
    parts = [url] if userinfo or len(rest) > 1 else []
    if userinfo:
        parts.append(userinfo[:-1])
    if len(rest) > 1:
        parts.append(rest)
    return parts


def secrets_of_settings() -> list[str]:
    return [part for url in configured_urls() for part in _url_secrets(url)]


def _redact_url(match: re.Match[str]) -> str:
    scheme, userinfo, host, rest = match.groups()
    if not userinfo and len(rest) <= 1:
        return match.group(0)  # nothing but scheme and host: nothing to hide
    return f"{scheme}://{host}/{REDACTED}"


def redact(text: str, secrets: list[str] | None = None) -> str:
    """`text` with every configured node URL (or part of one) and every URL's userinfo, path and
    query replaced."""
    if secrets is None:
        secrets = secrets_of_settings()
    ordered = sorted(secrets, key=len, reverse=True)
    urls = [secret for secret in ordered if _URL.fullmatch(secret)]
    for url in urls:  # whole configured URLs first, whatever characters they hold
        text = text.replace(url, _URL.sub(_redact_url, url))
    text = _URL.sub(_redact_url, text)
    for secret in ordered:  # then their parts quoted on their own (a path, a userinfo)
        if secret not in urls:
            text = text.replace(secret, REDACTED)
    return text


_RECORD_ATTRS = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime"}


class RedactUrlsFilter(logging.Filter):
    """Redacts node URLs in a record's message, exception text, stack and extra strings. On the
    handler, so that it also covers the exceptions web3 and requests raise."""

    def filter(self, record: logging.LogRecord) -> bool:
        secrets = secrets_of_settings()
        try:
            message = record.getMessage()
        except Exception:  # a broken format string: logging reports it itself
            return True
        redacted = redact(message, secrets)
        if redacted != message:
            record.msg, record.args = redacted, None
        # The formatted exception, which logging's formatters use when set (exc_info stays on the
        # record for the other handlers; RedactingJsonFormatter redacts its own formatting).
        if record.exc_info and record.exc_info[0] is not None and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text, secrets)
        if record.stack_info:
            record.stack_info = redact(record.stack_info, secrets)
        for name, value in list(vars(record).items()):
            if name not in _RECORD_ATTRS and isinstance(value, str):
                setattr(record, name, redact(value, secrets))
        return True


class RedactingJsonFormatter(JsonFormatter):
    """python-json-logger's formatter, whose exception and stack text are redacted too (it
    formats the exception afresh instead of using the record's redacted `exc_text`)."""

    def formatException(self, ei: Any) -> str:
        return redact(str(super().formatException(ei)))

    def formatStack(self, stack_info: str) -> str:
        return redact(str(super().formatStack(stack_info)))


def redact_data(value: Any, secrets: list[str]) -> Any:
    """Every string in a JSON-like structure (a Sentry event or breadcrumb) redacted."""
    if isinstance(value, str):
        return redact(value, secrets)
    if isinstance(value, dict):
        return {key: redact_data(item, secrets) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [redact_data(item, secrets) for item in value]
    return value


# Configuration ------------------------------------------------------------------------------

_PLAIN = "%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s"
_JSON_FIELDS = "%(asctime)s %(levelname)s %(name)s %(request_id)s %(message)s"


def logging_config(log_format: str, level: str) -> dict[str, Any]:
    """The LOGGING setting: one console handler in `log_format`, with the request id and the
    redaction filters."""
    if log_format not in LOG_FORMATS:
        raise ImproperlyConfigured(
            f"LOG_FORMAT must be one of {', '.join(LOG_FORMATS)}, not {log_format!r}"
        )
    formatter: dict[str, Any] = {"format": _PLAIN}
    if log_format == "json":
        formatter = {
            "()": "core.logs.RedactingJsonFormatter",
            "fmt": _JSON_FIELDS,
            "rename_fields": {"asctime": "time", "levelname": "level", "name": "logger"},
        }
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {
            "request_id": {"()": "core.logs.RequestIdFilter"},
            "redact_urls": {"()": "core.logs.RedactUrlsFilter"},
        },
        "formatters": {"console": formatter},
        "handlers": {
            "console": {
                "class": "logging.StreamHandler",
                "formatter": "console",
                "filters": ["request_id", "redact_urls"],
            },
        },
        "root": {"handlers": ["console"], "level": level},
        "loggers": {
            "django.request": {"handlers": ["console"], "level": "ERROR", "propagate": False},
        },
    }


# Celery -------------------------------------------------------------------------------------

_task_tokens: dict[str, Token[str]] = {}


def task_publishing(headers: dict[str, Any] | None = None, **_: Any) -> None:
    """before_task_publish: the current request id goes with the task (unless it has one)."""
    current = _request_id.get()
    if headers is not None and current != NO_REQUEST:
        headers.setdefault(TASK_HEADER, current)


def task_starting(task_id: str | None = None, task: Any = None, **_: Any) -> None:
    """task_prerun: the task runs under the request id it was published with; a task published
    outside a request (beat) gets a new one, which the tasks it enqueues inherit."""
    request = getattr(task, "request", None)
    carried = getattr(request, TASK_HEADER, None) or (getattr(request, "headers", None) or {}).get(
        TASK_HEADER
    )
    if not isinstance(carried, str) or not _TOKEN.fullmatch(carried):
        current = _request_id.get()
        carried = current if current != NO_REQUEST else new_request_id()
    if task_id is not None:
        _task_tokens[task_id] = _request_id.set(carried)


def task_finished(task_id: str | None = None, **_: Any) -> None:
    """task_postrun: back to the id the worker (or the eager caller) had before the task."""
    token = _task_tokens.pop(task_id, None) if task_id is not None else None
    if token is not None:
        _request_id.reset(token)


def connect_celery_signals() -> None:
    from celery import signals

    signals.before_task_publish.connect(task_publishing, weak=False, dispatch_uid="lat-rid-pub")
    signals.task_prerun.connect(task_starting, weak=False, dispatch_uid="lat-rid-prerun")
    signals.task_postrun.connect(task_finished, weak=False, dispatch_uid="lat-rid-postrun")


# Sentry -------------------------------------------------------------------------------------


def sentry_before_send(event: Event, hint: Hint) -> Event:
    """Every string of the event redacted, and the request id as a tag."""
    redacted: Event = redact_data(event, secrets_of_settings())
    current = _request_id.get()
    if current != NO_REQUEST:
        redacted["tags"] = {**redacted.get("tags", {}), "request_id": current}
    return redacted


def sentry_before_breadcrumb(crumb: Breadcrumb, hint: BreadcrumbHint) -> Breadcrumb:
    redacted: Breadcrumb = redact_data(crumb, secrets_of_settings())
    return redacted


def init_sentry(*, dsn: str, environment: str, release: str | None) -> None:
    """Sentry with the Django and Celery integrations, no personal data, every event redacted."""
    import sentry_sdk
    from sentry_sdk.integrations.celery import CeleryIntegration
    from sentry_sdk.integrations.django import DjangoIntegration

    sentry_sdk.init(
        dsn=dsn,
        environment=environment,
        release=release,
        integrations=[DjangoIntegration(), CeleryIntegration()],
        send_default_pii=False,
        before_send=sentry_before_send,
        before_breadcrumb=sentry_before_breadcrumb,
    )
