"""A socket for http.client whose every operation is given only what is left of a deadline:
a server that trickles a byte at a time cannot stretch a request past it (the AVS metadata
fetch, lats/metadata.py; simulate-deposit's node calls, chain/deadline.py)."""

from __future__ import annotations

import io
import socket
import time
from collections.abc import Callable
from typing import Any


def seconds_left(deadline: float, *, what: str = "the deadline") -> float:
    """Seconds from now to `deadline` (a time.monotonic() value); TimeoutError once there are
    none."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError(f"{what} passed")
    return left


class DeadlineSocket:
    """What http.client needs of a socket. `left()` gives the seconds left, and raises
    TimeoutError once there are none."""

    def __init__(self, sock: socket.socket, left: Callable[[], float]) -> None:
        self.sock = sock
        self._left = left

    def sendall(self, data: bytes) -> None:
        self.sock.settimeout(self._left())
        self.sock.sendall(data)

    def recv_into(self, buffer: Any) -> int:
        self.sock.settimeout(self._left())
        return self.sock.recv_into(buffer)

    def makefile(self, mode: str = "rb", *args: Any, **kwargs: Any) -> io.BufferedReader:
        return io.BufferedReader(_Reader(self))

    def close(self) -> None:
        """Nothing: http.client closes a connection while its answer is still being read; the
        socket's owner closes it once done with the connection."""


class _Reader(io.RawIOBase):
    def __init__(self, sock: DeadlineSocket) -> None:
        super().__init__()
        self._sock = sock

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        return self._sock.recv_into(buffer)
