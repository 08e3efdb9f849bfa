"""The web process's gunicorn worker: gunicorn's threaded worker, whose own error answers (a
request it cannot parse, before Django sees it) use the API's JSON error body.

gunicorn answers a request line over `--limit-request-line` (414), header fields over its limits
(431), a malformed request (400) and a failure outside the application (500) itself, with an
HTML page. The Procfile's `web` runs this worker class so that those answers too are the error
body the schema documents: `bad_request` with gunicorn's status, `internal_server_error` for a
500, and a message that names the limit without echoing the request. Each carries a new
`X-Request-ID`, as every answer does (the request was not read, so the caller's is not taken).
"""

from __future__ import annotations

import json

from gunicorn import util
from gunicorn.workers.gthread import ThreadWorker

_MESSAGES = {
    414: "The request line (the path and query string) is longer than the server accepts "
    "({limit} bytes at most).",
    431: "The request's header fields are larger than the server accepts.",
    501: "The request's transfer coding is not supported.",
}
_BAD_REQUEST = "The request is malformed: it is not a valid HTTP/1.1 request."
_INTERNAL = "Internal server error. The failure has been logged."


def error_answer(status: int, reason: str, limit: int) -> bytes:
    """The whole HTTP answer gunicorn sends for an error of its own, as the API's error body."""
    # Django is set up once the worker loaded the app.
    from core.api.errors import error_body
    from core.logs import HEADER, new_request_id

    if status >= 500 and status != 501:
        code, message = "internal_server_error", _INTERNAL
    else:
        code, message = "bad_request", _MESSAGES.get(status, _BAD_REQUEST).format(limit=limit)
    body = json.dumps(error_body(code, message)).encode()
    head = (
        f"HTTP/1.1 {status} {reason}\r\nConnection: close\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        f"{HEADER}: {new_request_id()}\r\n\r\n"
    )
    return head.encode("latin-1") + body


class JsonErrorWorker(ThreadWorker):
    """gthread, with gunicorn's own error answers in the JSON error body."""

    def init_process(self) -> None:
        limit = self.cfg.limit_request_line

        def write_error(sock, status_int, reason, mesg):  # gunicorn.util.write_error's signature
            util.write_nonblock(sock, error_answer(int(status_int), reason, limit))

        # gunicorn's workers send their error pages through gunicorn.util.write_error.
        util.write_error = write_error
        super().init_process()
