"""Benchmarks of the LAT service: `bench/run.py`, see bench/README.md."""

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PYTHON = sys.executable


def python(*args: str, env: dict[str, str]) -> str:
    """`python <args>` in the repository with `env` as its whole environment: its output, or a
    RuntimeError with its output when it fails."""
    done = subprocess.run([PYTHON, *args], cwd=REPO, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"python {' '.join(args)} failed:\n{done.stdout}{done.stderr[-3000:]}")
    return done.stdout
