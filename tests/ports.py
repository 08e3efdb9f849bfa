"""Addresses on 127.0.0.1 where nothing listens: a node or a cache that refuses connections."""

from __future__ import annotations

import socket


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def closed_port_url() -> str:
    return f"http://127.0.0.1:{closed_port()}"  # nothing listens there once the socket is closed
