"""Processes a test starts (a Redis, a Procfile line): stopped politely, then for sure."""

from __future__ import annotations

import subprocess


def terminate(process: subprocess.Popen, timeout: float = 10) -> None:
    """SIGTERM, and SIGKILL if it has not ended within `timeout` seconds."""
    process.terminate()
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout)
