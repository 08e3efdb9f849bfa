"""Benchmarks of the LAT service: `bench/run.py`, see bench/README.md."""

import subprocess
import sys
from pathlib import Path

REPO, PYTHON = Path(__file__).resolve().parent.parent, sys.executable


def python(*args: str, env: dict[str, str]) -> str:
    """`python <args>` in the repository with `env` as its whole environment: its output."""
    done = subprocess.run([PYTHON, *args], cwd=REPO, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"python {' '.join(args)} failed:\n{done.stdout}{done.stderr[-3000:]}")
    return done.stdout


def rpc(url: str, method: str, *params, session=None):
    """One JSON-RPC call to a node: its result."""
    import requests

    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": list(params)}
    return (session or requests).post(url, json=body, timeout=300).json()["result"]
