"""Section `restaking`: simulate-deposit's p50 within 1.3x of its JSON-RPC batch sent straight to
anvil, and the deposit build at least 50% of the baseline's req/s, each pair in alternate rounds."""

from __future__ import annotations

import json
import math

from bench.context import NO_LIMIT, Context, SectionResult

TITLE = "Direct Restaking: simulate-deposit latency and deposit-build throughput (anvil)"
MAX_SIMULATE_P50_FACTOR, MIN_BUILD_RATIO = 1.3, 0.50
SENDER_INDEX = 13  # a free anvil account (10 is deposit_many's)
LATENCY_CONNECTIONS = (1, 4)  # a sequential client, light concurrent load: the pairs' below
ROUNDS = 3
COLUMNS = ["measurement", "conns", "req/s", "p50 ms", "p90 ms", "p99 ms", "requests", "errors"]
AMOUNTS = [10**18, 2_500_000]  # 1 stETH (18 decimals), 2.5 cbETH (6)
NAMES = ["simulate-deposit", "raw JSON-RPC batch", "baseline", "deposit build"]


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
            rounds = dict(rounds=ROUNDS, warmup=args.warmup, duration=args.duration / ROUNDS)
            for k, connections in [(0, 1), (0, 4), (2, args.connections)]:  # the pairs of sides
                pair = slice(k, k + 2)
                loads = ctx.interleave(sides[pair], connections=connections, **rounds)
                for name, (url, body), load in zip(NAMES[pair], sides[pair], loads, strict=True):
                    figures[name, connections] = load
                    url = f"{'POST' if body else 'GET'} {url.removeprefix(server.url(''))[:40]}"
                    ms = (f"{x:.2f}" for x in (load.p50_ms, load.p90_ms, load.p99_ms))
                    result.rows.append(
                        [f"{name}  {url}", str(connections), f"{load.rps:,.0f}", *ms]
                    )
                    result.rows[-1] += [f"{load.requests:,}", str(load.errors)]
                    result.check(f"{name} x{connections}", load, server)
    for connections in LATENCY_CONNECTIONS:
        sim, raw = figures[NAMES[0], connections], figures[NAMES[1], connections]
        factor, plural = sim.p50_ms / raw.p50_ms, "s" if connections > 1 else ""
        description = f"simulate-deposit p50 within {MAX_SIMULATE_P50_FACTOR:g}x of the raw batch "
        description += f"({connections} connection{plural})"
        detail = f"{factor:.2f}x ({sim.p50_ms:.2f} vs {raw.p50_ms:.2f} ms)"
        result.target(description, factor, detail, at_most=MAX_SIMULATE_P50_FACTOR)
    base, build = figures[NAMES[2], args.connections], figures[NAMES[3], args.connections]
    ratio, description = build.rps / base.rps, f"deposit build >= {MIN_BUILD_RATIO:.0%} of"
    detail = f"{ratio:.0%} ({build.rps:,.0f} vs {base.rps:,.0f} req/s)"
    result.target(f"{description} baseline req/s", ratio, detail, at_least=MIN_BUILD_RATIO)
    result.notes.append(
        f"  simulate-deposit: {len(manifest['tokens'])} assets, one JSON-RPC batch (eth_call, "
        "eth_estimateGas, eth_gasPrice, the oracle's arePricesStale) per request; the raw batch "
        "is that batch sent straight to anvil. Each pair of rows is measured in alternating "
        "rounds (a b, b a, a b): req/s over all of them, the percentiles the median of the "
        "rounds'."
    )


def _fund(rpc_url: str, manifest: dict) -> str:
    """A sender holding plenty of each of latETH's tokens with the LAT approved for all of it."""
    from devchain.devnet import connect, contract

    w3 = connect(rpc_url)
    sender = w3.eth.accounts[SENDER_INDEX]
    for token_ref, amount in zip(manifest["tokens"], AMOUNTS, strict=False):
        token = contract(w3, "TestERC20", token_ref["address"]).functions
        for call in (
            token.mint(sender, amount * 10**6),
            token.approve(manifest["proxyAddress"], 2**256 - 1),
        ):
            if w3.eth.wait_for_transaction_receipt(call.transact({"from": sender}))["status"] != 1:
                raise RuntimeError("funding the bench sender failed")
    return sender


def _sides(base: str, rpc_url: str, manifest: dict, sender: str) -> list[tuple]:
    # (URL, JSON body or None) of simulate-deposit, its raw batch, the baseline, the build
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
    stale = {
        "to": oracle,
        "data": "0x" + function("TokenRegistryOracle", "arePricesStale").selector.hex(),
    }
    calls = [("eth_call", [tx, "latest"]), ("eth_estimateGas", [tx, "latest"])]
    calls += [("eth_gasPrice", []), ("eth_call", [stale, "latest"])]
    batch = [
        {"jsonrpc": "2.0", "method": m, "params": p, "id": i} for i, (m, p) in enumerate(calls)
    ]
    sides = [
        (f"{base}/lat/{lat}/simulate-deposit", {**deposit, "sender": sender}),
        (rpc_url, batch),
        (f"{base}/bench/baseline", None),
        (f"{base}/lat/{lat}/deposit", deposit),
    ]
    return [(url, body and json.dumps(body, separators=(",", ":")).encode()) for url, body in sides]
