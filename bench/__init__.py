"""Benchmarks of the LAT service: `bench/run.py`, see bench/README.md."""

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
