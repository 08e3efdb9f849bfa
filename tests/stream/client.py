"""The stream process as the Procfile runs it, and a Server-Sent Events client of plain sockets
(what a browser's EventSource does: one GET, chunked lines, `Last-Event-ID` to resume)."""

from __future__ import annotations

import json
import os
import shlex
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.processes import terminate

REPO = Path(__file__).resolve().parents[2]


class StreamProcess:
    """The Procfile's `stream` line as it is, on `port` (default a free one), with `env`
    added."""

    def __init__(self, env: dict[str, str], port: int | None = None) -> None:
        from tests.ports import closed_port

        line = next(
            line.split(":", 1)[1]
            for line in (REPO / "Procfile").read_text().splitlines()
            if line.startswith("stream:")
        )
        self.port = port or closed_port()
        command = shlex.split(line.replace("${STREAM_PORT:-8001}", str(self.port)))
        command[0] = str(Path(sys.executable).with_name(command[0]))  # the venv's uvicorn
        self.process = subprocess.Popen(
            command, cwd=REPO, env={**os.environ, **env}, stderr=subprocess.PIPE, text=True
        )
        self.log: list[str] = []
        threading.Thread(target=self._drain, daemon=True).start()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError("the stream process did not listen:\n" + "".join(self.log))

    def _drain(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.log.append(line)

    def stop(self) -> None:
        terminate(self.process)


@dataclass
class Message:
    id: str
    event: str
    data: dict[str, Any]


# What every browser's EventSource sends with its GET (the HTML standard's "Server-sent events").
EVENTSOURCE_HEADERS = {"Accept": "text/event-stream", "Cache-Control": "no-cache"}


@dataclass
class Client:
    """One stream: its answer's status and headers; its messages and comments as they come.
    It connects as EventSource does (EVENTSOURCE_HEADERS, which `headers` may replace)."""

    port: int
    path: str = "/stream/events"
    headers: dict[str, str] = field(default_factory=dict)
    status: int = 0
    response_headers: dict[str, str] = field(default_factory=dict)
    body: Any = None  # the JSON error body, when not 200
    messages: list[Message] = field(default_factory=list)
    comments: list[str] = field(default_factory=list)
    closed: bool = False  # the server ended the stream

    def __post_init__(self) -> None:
        self.sock = socket.create_connection(("127.0.0.1", self.port), timeout=30)
        sent = {**EVENTSOURCE_HEADERS, **self.headers}
        head = "".join(f"{k}: {v}\r\n" for k, v in sent.items() if v)
        request = f"GET {self.path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{head}\r\n"
        self.sock.sendall(request.encode())
        self.file = self.sock.makefile("rb")
        self.status = int(self.file.readline().split()[1])
        while (line := self.file.readline().decode().rstrip("\r\n")) != "":
            name, _, value = line.partition(":")
            self.response_headers[name.lower()] = value.strip()
        if self.status != 200:
            length = int(self.response_headers.get("content-length", "0"))
            self.body = json.loads(self.file.read(length))
            self.close()
            return
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _chunks(self):
        while True:
            size = int(self.file.readline().strip(), 16)
            if size == 0:
                return
            yield self.file.read(size)
            self.file.readline()

    def _read(self) -> None:
        buffer = b""
        try:
            for chunk in self._chunks():
                buffer += chunk
                while b"\n\n" in buffer:
                    block, buffer = buffer.split(b"\n\n", 1)
                    self._block(block.decode())
        except (OSError, ValueError):
            pass
        self.closed = True

    def _block(self, block: str) -> None:
        fields: dict[str, str] = {}
        for line in block.split("\n"):
            if line.startswith(":"):
                self.comments.append(line[1:].strip())
            else:
                name, _, value = line.partition(": ")
                fields[name] = value
        if "data" in fields:
            message = Message(fields.get("id", ""), fields["event"], json.loads(fields["data"]))
            self.messages.append(message)

    def wait(self, count: int, timeout: float = 10.0) -> list[Message]:
        """The first `count` messages, once they came; AssertionError after `timeout`."""
        deadline = time.monotonic() + timeout
        while len(self.messages) < count and time.monotonic() < deadline and not self.closed:
            time.sleep(0.01)
        assert len(self.messages) >= count, f"{len(self.messages)} of {count} messages came"
        return self.messages[:count]

    def close(self) -> None:
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
