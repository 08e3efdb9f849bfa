"""What the service serves, read through its API in the shape tests/chainreads.py gives the
chain's facts, so that the two compare with ==."""

from __future__ import annotations

from typing import Any


def served_deposits(api) -> list[dict[str, Any]]:
    body = api.get("/metrics/deposits?take=100").json()
    assert body["meta"]["total"] == len(body["data"]) or len(body["data"]) == 100
    return [{k: v for k, v in row.items() if k != "createdAt"} for row in body["data"]]
