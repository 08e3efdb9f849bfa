"""Benchmarks of the LAT service: `make bench` runs `bench/run.py` (see bench/README.md)."""
