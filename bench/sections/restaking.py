"""Section `restaking`: `POST /lat/{address}/simulate-deposit` latency beside the same JSON-RPC
batch sent straight to anvil, and `POST /lat/{address}/deposit` req/s beside the baseline.

It sets up its own anvil with the devnet, a database (`lat_restaking_bench`, recreated every
run) with latETH imported and synced, a funded sender, and gunicorn on that node. Each
comparison runs its two sides in alternating rounds, so that the machine's load weighs on both.
"""

from __future__ import annotations

import json
import math
import time

import requests

from bench.context import Context, SectionResult
from bench.load import LoadResult

TITLE = "Direct Restaking: simulate-deposit latency and deposit-build throughput (anvil)"
MAX_SIMULATE_P50_FACTOR = 1.3  # the live-data issue: simulate-deposit within 1.3x of the raw batch
MIN_BUILD_RATIO = 0.50
SENDER_INDEX = 13  # a free anvil account (10 is deposit_many's)
LATENCY_CONNECTIONS = (1, 4)  # a sequential client, light concurrent load
ROUNDS = 3
COLUMNS = ["measurement", "conns", "req/s", "p50 ms", "p90 ms", "p99 ms", "requests", "errors"]


def run(ctx: Context, result: SectionResult) -> None:
    result.columns = COLUMNS
    started = time.monotonic()
    with ctx.devnet("restaking", synced=True) as (rpc_url, manifest, db_url):
        sender = _prepare(rpc_url, manifest)
        ctx.log(f"restaking: devnet, database and sender in {time.monotonic() - started:.0f} s")
        # gthread workers, as the Procfile runs them, with a slot for every latency connection:
        # sync workers (one request each) would make the 4th connection queue behind the other
        # three, a wait the raw side (anvil serves them all at once) never has. The simulate
        # throttle's counter still runs on every request, out of the client's reach.
        threads = max(2, math.ceil(max(LATENCY_CONNECTIONS) / ctx.args.workers))
        limit = {"RATE_LIMIT_SIMULATE": "1000000000/s"}
        with ctx.server(threads=threads, DATABASE_URL=db_url, RPC_URL=rpc_url, **limit) as server:
            base = server.url("")
            sides = _sides(base, rpc_url, manifest, sender)
            for name, _, url, body in sides:
                _smoke(name, url, body)
            plan = [(sides[:2], c) for c in LATENCY_CONNECTIONS]
            figures = {}
            for pair, connections in [*plan, (sides[2:], ctx.args.connections)]:
                loads = ctx.interleave(
                    [(url, body) for _, _, url, body in pair], rounds=ROUNDS,
                    warmup=ctx.args.warmup, connections=connections,
                    duration=ctx.args.duration / ROUNDS,
                )  # fmt: skip
                for (name, method, url, _), merged in zip(pair, loads, strict=True):
                    figures[name, connections] = merged
                    ctx.log(f"restaking: {name} x{connections}: {merged.summary()}")
                    label = f"{name}  {method} {url.removeprefix(base)[:40]}"
                    result.rows.append([label, str(connections), *_row(merged)])
                    result.check(f"{name} x{connections}", merged, server)
    _targets(result, figures, ctx.args.connections)
    result.notes.append(
        f"  simulate-deposit: {len(manifest['tokens'])} assets, one JSON-RPC batch (eth_call, "
        "eth_estimateGas, eth_gasPrice, the oracle's arePricesStale) per request; the raw batch "
        "is that batch sent straight to anvil. Each pair of rows is measured in alternating "
        "rounds (a b, b a, a b): req/s over all of them, the percentiles the median of the "
        "rounds'."
    )


def _row(load: LoadResult) -> list[str]:
    capped = " (cap)" if load.capped else ""
    ms = (f"{x:.2f}" for x in (load.p50_ms, load.p90_ms, load.p99_ms))
    return [f"{load.rps:,.0f}", *ms, f"{load.requests:,}{capped}", str(load.errors)]


def _prepare(rpc_url: str, manifest: dict) -> str:
    """A sender holding plenty of each of latETH's tokens with the LAT approved for all of it."""
    from devchain.devnet import connect, contract

    w3 = connect(rpc_url)
    sender = w3.to_checksum_address(w3.eth.accounts[SENDER_INDEX])
    for token_ref, amount in zip(manifest["tokens"], _amounts(manifest), strict=True):
        token = contract(w3, "TestERC20", token_ref["address"])
        for call in (
            token.functions.mint(sender, amount * 1_000_000),
            token.functions.approve(manifest["proxyAddress"], 2**256 - 1),
        ):
            receipt = w3.eth.wait_for_transaction_receipt(call.transact({"from": sender}))
            if receipt["status"] != 1:
                raise RuntimeError(f"funding the bench sender failed: {receipt}")
    return sender


def _amounts(manifest: dict) -> list[int]:
    return [10**18, 2_500_000][: len(manifest["tokens"])]  # 1 stETH (18 decimals), 2.5 cbETH (6)


def _sides(base: str, rpc_url: str, manifest: dict, sender: str) -> list[tuple]:
    """(name, method, URL, JSON body) of simulate-deposit, the raw batch, the baseline and the
    build, in that order."""
    from eth_utils import to_checksum_address

    from chain.abi import function
    from chain.gateway import Gateway

    lat = to_checksum_address(manifest["proxyAddress"])
    assets = [to_checksum_address(t["address"]) for t in manifest["tokens"]]
    amounts = _amounts(manifest)
    deposit = {"assets": assets, "amounts": [str(a) for a in amounts], "receiver": sender}
    # The batch Gateway.simulate_deposit sends: the same calldata and calls, at "latest".
    calldata = Gateway.deposit_calldata(assets=assets, amounts=amounts, receiver=sender)
    tx = {"from": sender, "to": lat, "data": calldata, "value": "0x0"}
    oracle = manifest["contractDeployments"]["proxy"]["tokenRegistryOracle"]["address"]
    stale = {
        "to": oracle,
        "data": "0x" + function("TokenRegistryOracle", "arePricesStale").selector.hex(),
    }
    calls = [
        ("eth_call", [tx, "latest"]),
        ("eth_estimateGas", [tx, "latest"]),
        ("eth_gasPrice", []),
        ("eth_call", [stale, "latest"]),
    ]
    batch = [
        {"jsonrpc": "2.0", "method": method, "params": params, "id": i}
        for i, (method, params) in enumerate(calls)
    ]
    sides = [
        ("simulate-deposit", f"{base}/lat/{lat}/simulate-deposit", {**deposit, "sender": sender}),
        ("raw JSON-RPC batch", rpc_url, batch),
        ("baseline", f"{base}/bench/baseline", None),
        ("deposit build", f"{base}/lat/{lat}/deposit", deposit),
    ]
    return [
        (name, "GET" if body is None else "POST", url, _json(body)) for name, url, body in sides
    ]


def _json(body) -> bytes | None:
    return None if body is None else json.dumps(body, separators=(",", ":")).encode()


# Smoke checks of one answer of each side (200 and this), before any load.
ANSWERS_OK = {
    "simulate-deposit": lambda answer: answer["success"] is True,
    "raw JSON-RPC batch": lambda answer: not any("error" in r for r in answer),
    "baseline": lambda answer: "data" in answer,
    "deposit build": lambda answer: bool(answer["data"]["transaction"]["data"]),
}


def _smoke(name: str, url: str, body: bytes | None) -> None:
    headers = {"Content-Type": "application/json"}
    answer = requests.request(
        "GET" if body is None else "POST", url, data=body, headers=headers, timeout=30
    )
    if answer.status_code != 200 or not ANSWERS_OK[name](answer.json()):
        raise RuntimeError(f"{name}: HTTP {answer.status_code}: {answer.text[:300]}")


def _targets(result: SectionResult, figures: dict, build_connections: int) -> None:
    for connections in LATENCY_CONNECTIONS:
        sim = figures[("simulate-deposit", connections)]
        raw = figures[("raw JSON-RPC batch", connections)]
        factor, plural = sim.p50_ms / raw.p50_ms, "s" if connections > 1 else ""
        description = (
            f"simulate-deposit p50 within {MAX_SIMULATE_P50_FACTOR:g}x of the raw batch "
            f"({connections} connection{plural})"
        )
        detail = f"{factor:.2f}x ({sim.p50_ms:.2f} vs {raw.p50_ms:.2f} ms)"
        result.target(description, factor, detail, at_most=MAX_SIMULATE_P50_FACTOR)
    build = figures[("deposit build", build_connections)]
    base = figures[("baseline", build_connections)]
    ratio = build.rps / base.rps
    description = f"deposit build >= {MIN_BUILD_RATIO:.0%} of baseline req/s"
    detail = f"{ratio:.0%} ({build.rps:,.0f} vs {base.rps:,.0f} req/s)"
    result.target(description, ratio, detail, at_least=MIN_BUILD_RATIO)
