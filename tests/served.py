"""What the service serves, read through its API in the shape tests/chainreads.py gives the
chain's facts, so that the two compare with ==."""

from __future__ import annotations

from typing import Any


def served_deposits(api) -> list[dict[str, Any]]:
    body = api.get("/metrics/deposits?take=100").json()
    assert body["meta"]["total"] == len(body["data"]) or len(body["data"]) == 100
    return [{k: v for k, v in row.items() if k != "createdAt"} for row in body["data"]]


def served_events(api, lat: str, take: int = 5, **query: Any) -> list[dict[str, Any]]:
    """Every event of the LAT's feed as the API serves it, page by page through meta.next."""
    out: list[dict[str, Any]] = []
    params: dict[str, Any] = {"take": take, **query}
    while True:
        response = api.get(f"/lat/{lat}/events", params)
        assert response.status_code == 200, response.content
        body = response.json()
        assert len(body["data"]) <= take
        out += body["data"]
        if body["meta"]["next"] is None:
            return out
        params["cursor"] = body["meta"]["next"]


def served_holders(api, lat: str, take: int = 2) -> tuple[list[tuple[str, int]], int]:
    """Every holder as the API serves them, page by page through skip; and meta.total."""
    out: list[tuple[str, int]] = []
    while True:
        body = api.get(f"/lat/{lat}/holders", {"skip": len(out), "take": take}).json()
        out += [(row["address"], int(row["balance"])) for row in body["data"]]
        if len(body["data"]) < take:
            return out, body["meta"]["total"]
