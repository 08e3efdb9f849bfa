"""Section `restaking`: `POST /lat/{address}/simulate-deposit` latency beside the same JSON-RPC
batch sent straight to anvil, and `POST /lat/{address}/deposit` req/s beside the baseline; on its
own anvil and database (latETH imported and synced, a funded sender), each pair of sides loaded
in alternating rounds so that the machine's load weighs on both."""

from __future__ import annotations

import json
import math

import requests

from bench.context import NO_LIMIT, Context, SectionResult

TITLE = "Direct Restaking: simulate-deposit latency and deposit-build throughput (anvil)"
MAX_SIMULATE_P50_FACTOR = 1.3  # simulate-deposit within 1.3x of the raw batch
MIN_BUILD_RATIO = 0.50
SENDER_INDEX = 13  # a free anvil account (10 is deposit_many's)
LATENCY_CONNECTIONS = (1, 4)  # a sequential client, light concurrent load
ROUNDS = 3
COLUMNS = ["measurement", "conns", "req/s", "p50 ms", "p90 ms", "p99 ms", "requests", "errors"]
JSON = {"Content-Type": "application/json"}
AMOUNTS = [10**18, 2_500_000]  # 1 stETH (18 decimals), 2.5 cbETH (6)
# (name, answer check) of each side, before any load
SIDES = [
    ("simulate-deposit", lambda answer: answer["success"] is True),
    ("raw JSON-RPC batch", lambda answer: not any("error" in r for r in answer)),
    ("baseline", lambda answer: "data" in answer),
    ("deposit build", lambda answer: bool(answer["data"]["transaction"]["data"])),
]


def run(ctx: Context, result: SectionResult) -> None:
    result.columns, figures, args = COLUMNS, {}, ctx.args
    with ctx.devnet("restaking", synced=True) as (rpc_url, manifest, db_url):
        sender = _fund(rpc_url, manifest)
        # gthread workers as in the Procfile, a thread for every latency connection (anvil
        # serves the raw side's 4 at once); the simulate throttle still counts, out of reach.
        threads = max(2, math.ceil(max(LATENCY_CONNECTIONS) / args.workers))
        env = {"DATABASE_URL": db_url, "RPC_URL": rpc_url, "RATE_LIMIT_SIMULATE": NO_LIMIT}
        with ctx.server(threads=threads, **env) as server:
            sides = _sides(server.url(""), rpc_url, manifest, sender)
            for (name, ok), (url, body) in zip(SIDES, sides, strict=True):
                got = requests.request(
                    "POST" if body else "GET", url, data=body, headers=JSON, timeout=30
                )
                if got.status_code != 200 or not ok(got.json()):
                    raise RuntimeError(f"{name}: HTTP {got.status_code}: {got.text[:300]}")
            rounds = dict(rounds=ROUNDS, warmup=args.warmup, duration=args.duration / ROUNDS)
            plan = [(0, c) for c in LATENCY_CONNECTIONS] + [(2, args.connections)]
            for first, connections in plan:
                loads = ctx.interleave(sides[first : first + 2], connections=connections, **rounds)
                for k, merged in enumerate(loads, first):
                    figures[SIDES[k][0], connections] = merged
                    url, method = sides[k][0], "POST" if sides[k][1] else "GET"
                    label = f"{SIDES[k][0]}  {method} {url.removeprefix(server.url(''))[:40]}"
                    result.rows.append([label, str(connections), *_row(merged)])
                    result.check(f"{SIDES[k][0]} x{connections}", merged, server)
    _targets(result, figures, args.connections)
    result.notes.append(
        f"  simulate-deposit: {len(manifest['tokens'])} assets, one JSON-RPC batch (eth_call, "
        "eth_estimateGas, eth_gasPrice, the oracle's arePricesStale) per request; the raw batch "
        "is that batch sent straight to anvil. Each pair of rows is measured in alternating "
        "rounds (a b, b a, a b): req/s over all of them, the percentiles the median of the "
        "rounds'."
    )


def _row(load) -> list[str]:
    ms = (f"{x:.2f}" for x in (load.p50_ms, load.p90_ms, load.p99_ms))
    return [f"{load.rps:,.0f}", *ms, f"{load.requests:,}", str(load.errors)]


def _fund(rpc_url: str, manifest: dict) -> str:
    """A sender holding plenty of each of latETH's tokens with the LAT approved for all of it."""
    from devchain.devnet import connect, contract

    w3 = connect(rpc_url)
    sender = w3.to_checksum_address(w3.eth.accounts[SENDER_INDEX])
    for token_ref, amount in zip(manifest["tokens"], AMOUNTS, strict=False):
        token = contract(w3, "TestERC20", token_ref["address"]).functions
        for call in (
            token.mint(sender, amount * 1_000_000),
            token.approve(manifest["proxyAddress"], 2**256 - 1),
        ):
            receipt = w3.eth.wait_for_transaction_receipt(call.transact({"from": sender}))
            if receipt["status"] != 1:
                raise RuntimeError(f"funding the bench sender failed: {receipt}")
    return sender


def _sides(base: str, rpc_url: str, manifest: dict, sender: str) -> list[tuple]:
    """(URL, JSON body or None) of each of SIDES."""
    from eth_utils import to_checksum_address

    from chain.abi import function
    from chain.gateway import Gateway

    lat = to_checksum_address(manifest["proxyAddress"])
    assets = [to_checksum_address(t["address"]) for t in manifest["tokens"]]
    amounts = AMOUNTS[: len(assets)]
    deposit = {"assets": assets, "amounts": [str(a) for a in amounts], "receiver": sender}
    # The batch Gateway.simulate_deposit sends: the same calldata and calls, at "latest".
    calldata = Gateway.deposit_calldata(assets=assets, amounts=amounts, receiver=sender)
    tx = {"from": sender, "to": lat, "data": calldata, "value": "0x0"}
    oracle = manifest["contractDeployments"]["proxy"]["tokenRegistryOracle"]["address"]
    selector = function("TokenRegistryOracle", "arePricesStale").selector.hex()
    stale = {"to": oracle, "data": "0x" + selector}
    calls = [("eth_call", [tx, "latest"]), ("eth_estimateGas", [tx, "latest"])]
    calls += [("eth_gasPrice", []), ("eth_call", [stale, "latest"])]
    batch = [
        {"jsonrpc": "2.0", "method": method, "params": params, "id": i}
        for i, (method, params) in enumerate(calls)
    ]
    sides = [
        (f"{base}/lat/{lat}/simulate-deposit", {**deposit, "sender": sender}),
        (rpc_url, batch),
        (f"{base}/bench/baseline", None),
        (f"{base}/lat/{lat}/deposit", deposit),
    ]
    return [(url, body and json.dumps(body, separators=(",", ":")).encode()) for url, body in sides]


def _targets(result: SectionResult, figures: dict, build_connections: int) -> None:
    for connections in LATENCY_CONNECTIONS:
        sim = figures["simulate-deposit", connections]
        raw = figures["raw JSON-RPC batch", connections]
        factor, plural = sim.p50_ms / raw.p50_ms, "s" if connections > 1 else ""
        description = f"simulate-deposit p50 within {MAX_SIMULATE_P50_FACTOR:g}x of the raw batch "
        description += f"({connections} connection{plural})"
        detail = f"{factor:.2f}x ({sim.p50_ms:.2f} vs {raw.p50_ms:.2f} ms)"
        result.target(description, factor, detail, at_most=MAX_SIMULATE_P50_FACTOR)
    build = figures["deposit build", build_connections]
    base = figures["baseline", build_connections]
    ratio = build.rps / base.rps
    description = f"deposit build >= {MIN_BUILD_RATIO:.0%} of baseline req/s"
    detail = f"{ratio:.0%} ({build.rps:,.0f} vs {base.rps:,.0f} req/s)"
    result.target(description, ratio, detail, at_least=MIN_BUILD_RATIO)
