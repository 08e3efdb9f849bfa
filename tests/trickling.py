"""A node that trickles its answer: the fault a total deadline exists for, which a real node
cannot be made to produce.

`TricklingServer(answer, at_once=n, interval=s)` listens on 127.0.0.1 and, for every connection,
reads the request, sends the first `n` bytes of `answer`, then one more byte every `s` seconds
until the answer is sent or the server stops: each socket read succeeds well within any
per-read timeout, while the whole answer takes as long as the caller's patience.
"""

from __future__ import annotations

import socket
import threading


class TricklingServer:
    def __init__(self, answer: bytes, *, at_once: int = 0, interval: float) -> None:
        self.answer, self.at_once, self.interval = answer, at_once, interval
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.stopping = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while not self.stopping.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                try:
                    conn.recv(65536)
                    conn.sendall(self.answer[: self.at_once])
                    for byte in self.answer[self.at_once :]:
                        if self.stopping.wait(self.interval):
                            return
                        conn.sendall(bytes([byte]))
                except OSError:
                    continue  # the caller gave up and closed: serve the next one

    def stop(self) -> None:
        self.stopping.set()
        self.sock.close()
