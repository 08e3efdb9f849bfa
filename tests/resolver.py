"""A fake resolver for tests whose names must resolve to given addresses (the real DNS cannot
be made to change its answer)."""

from __future__ import annotations

import socket
from typing import Any


class FakeResolver:
    """socket.getaddrinfo answering given addresses for given names (one answer per lookup,
    the last repeated); every other name goes to the real resolver."""

    def __init__(self) -> None:
        self.answers: dict[str, list[list[str]]] = {}
        self.calls: list[str] = []
        self._real = socket.getaddrinfo

    def __call__(self, host: str, port: Any, *args: Any, **kwargs: Any) -> list[Any]:
        if host not in self.answers:
            return self._real(host, port, *args, **kwargs)
        self.calls.append(host)
        queue = self.answers[host]
        addresses = queue.pop(0) if len(queue) > 1 else queue[0]
        return [
            (socket.AF_INET6, socket.SOCK_STREAM, 6, "", (address, port, 0, 0))
            if ":" in address
            else (socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port))
            for address in addresses
        ]
