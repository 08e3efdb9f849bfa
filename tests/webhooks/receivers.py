"""HTTP servers on loopback that receive webhooks in the tests: each records what it was sent
and answers as the test scripts it."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from standardwebhooks.webhooks import Webhook


@dataclass(frozen=True)
class Received:
    headers: dict[str, str]
    body: bytes
    at: float  # time.monotonic()

    @property
    def id(self) -> str:
        return self.headers["webhook-id"]

    def verify(self, secret: str) -> dict[str, Any]:
        """The payload, once the `standardwebhooks` package has verified its signature."""
        return Webhook(secret).verify(self.body, self.headers)


@dataclass
class Answer:
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b"ok"
    delay: float = 0.0


class Receiver:
    """Answers its scripted answers in turn (the last one repeated; 200 by default)."""

    def __init__(self, *answers: Answer) -> None:
        self.answers = list(answers) or [Answer()]
        self.head_answers = False  # HEAD: the scripted answers too, else 501 (POST only)
        self.received: list[Received] = []
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                with receiver.lock:
                    receiver.received.append(
                        Received(
                            {k.lower(): v for k, v in self.headers.items()}, body, time.monotonic()
                        )
                    )
                    answer = (
                        receiver.answers.pop(0)
                        if len(receiver.answers) > 1
                        else receiver.answers[0]
                    )
                if answer.delay:
                    time.sleep(answer.delay)
                try:
                    self.send_response(answer.status)
                    for name, value in answer.headers.items():
                        self.send_header(name, value)
                    self.send_header("Content-Length", str(len(answer.body)))
                    self.end_headers()
                    self.wfile.write(answer.body)
                except OSError:  # the sender gave up waiting (its deadline)
                    pass

            def do_HEAD(self) -> None:
                if not receiver.head_answers:
                    self.send_error(501)
                    return
                answer = receiver.answers[0]
                self.send_response(answer.status)
                for name, value in answer.headers.items():
                    self.send_header(name, value)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_port
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    def url(self, path: str = "/hook") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def ids(self) -> list[str]:
        with self.lock:
            return [r.id for r in self.received]

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
