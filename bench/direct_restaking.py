"""Direct Restaking benchmark: simulate-deposit latency beside the SAME JSON-RPC batch sent straight
to the node, and deposit-build throughput beside the constant-JSON baseline `GET /bench/baseline`.

Targets (printed, never enforced): simulate-deposit p50 within 1.5x of the raw batch's p50;
deposit-build requests/second at least 50% of the baseline's.

Entry points:

- `run(base_url=..., rpc_url=..., lat=..., assets=..., amounts=..., sender=...)` measures a
  running service and node that the caller prepared (the LAT imported and synced, the sender
  funded and approved so that the simulated deposit succeeds); returns one dict per measurement.
  `targets(rows)` turns them into the target lines.
- `section(ctx)` is the bench/run.py section: it prepares everything itself (an anvil with the
  devnet, a database of its own, `lat_restaking_bench`, with latETH imported and synced, a funded
  sender, gunicorn pointed at that anvil), then calls `run`.
- `python bench/direct_restaking.py [--duration 5] [--workers 3] ...` runs the section alone.

Load comes from `bench/http_load.py`: wrk when installed (POST bodies through a small wrapper of
bench/wrk_report.lua), else a Python closed loop of the same design as http_load's fallback.
Every measurement uses the same generator, so that the ratios compare like with like. One
connection is a sequential client; more connections are light concurrent load.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any
from unittest import mock
from urllib.parse import urlsplit

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import http_load
from bench.http_load import LoadResult

TITLE = "Direct Restaking: simulate-deposit latency and deposit-build throughput (anvil)"
MAX_SIMULATE_P50_FACTOR = 1.5
MIN_BUILD_RATIO = 0.50
BENCH_DB = "lat_restaking_bench"  # dropped and recreated on every run (name ends in _bench)
SENDER_INDEX = 13  # a free anvil account (10 is deposit_many's)
LAT_SYMBOL = "latETH"
WAD = 10**18


# --- the JSON-RPC batch simulate-deposit sends -------------------------------------------------


def deposit_bodies(
    *, assets: Sequence[str], amounts: Sequence[int], receiver: str, sender: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(deposit body, simulate-deposit body) as a client sends them."""
    deposit = {
        "assets": list(assets),
        "amounts": [str(int(a)) for a in amounts],
        "receiver": receiver,
    }
    return deposit, {**deposit, "sender": sender}


def simulation_batch(
    *, lat: str, assets: Sequence[str], amounts: Sequence[int], receiver: str, sender: str
) -> list[dict[str, Any]]:
    """The batch `Gateway.simulate_deposit` sends (lats/chain/gateway.py): the same calldata
    (`Gateway.deposit_calldata`), the same three calls, at "latest", as web3 encodes them."""
    from eth_utils import to_checksum_address

    from lats.chain.gateway import Gateway

    calldata = Gateway.deposit_calldata(
        assets=[to_checksum_address(a) for a in assets],
        amounts=[int(a) for a in amounts],
        receiver=to_checksum_address(receiver),
    )
    tx = {
        "from": to_checksum_address(sender),
        "to": to_checksum_address(lat),
        "data": calldata,
        "value": "0x0",
    }
    calls = [
        ("eth_call", [tx, "latest"]),
        ("eth_estimateGas", [tx, "latest"]),
        ("eth_gasPrice", []),
    ]
    return [
        {"jsonrpc": "2.0", "method": method, "params": params, "id": i}
        for i, (method, params) in enumerate(calls)
    ]


# --- POST load ----------------------------------------------------------------------------------


@contextlib.contextmanager
def _wrk_post_script(body: bytes) -> Iterator[Path]:
    """A wrk script that POSTs `body` as JSON and then reports like bench/wrk_report.lua."""
    text = body.decode()
    level = "=" * next(n for n in range(1, 100) if f"]{'=' * n}]" not in text)
    with tempfile.TemporaryDirectory(prefix="lat-bench-wrk-") as tmp:
        path = Path(tmp) / "post_report.lua"
        path.write_text(
            'wrk.method = "POST"\n'
            f"wrk.body = [{level}[{text}]{level}]\n"  # a Lua long string: no escapes
            'wrk.headers["Content-Type"] = "application/json"\n'
            f"dofile({json.dumps(str(http_load.WRK_SCRIPT))})\n"
        )
        yield path


def _py_post(
    url: str, body: bytes, *, duration: float, connections: int, max_requests: int
) -> LoadResult:
    parts = urlsplit(url)
    path = parts.path + (f"?{parts.query}" if parts.query else "")
    cap = -(-max_requests // connections) if max_requests else 0
    with multiprocessing.get_context("fork").Pool(connections) as pool:
        started = time.time()
        job = (parts.hostname, parts.port or 80, path, started + duration, cap, body)
        results = pool.map(http_load._py_worker, [job] * connections)
        elapsed = time.time() - started
    return http_load.python_result(url, connections, elapsed, results, max_requests)


def load(
    url: str,
    *,
    body: Any | None = None,
    duration: float,
    connections: int,
    max_requests: int = 0,
    tool: str = "auto",
    threads: int = 1,
) -> LoadResult:
    """http_load.run for a GET (body None) or a JSON POST, with the same generator."""
    if tool == "auto":
        tool = "wrk" if http_load.wrk_available() else "python"
    settings = {
        "duration": duration,
        "connections": connections,
        "max_requests": max_requests,
        "tool": tool,
        "threads": threads,
    }
    if body is None:
        return http_load.run(url, **settings)
    raw = json.dumps(body, separators=(",", ":")).encode()
    http_load._check_local(url)
    if tool == "python":
        return _py_post(
            url, raw, duration=duration, connections=connections, max_requests=max_requests
        )
    # http_load's wrk runner, with the POST wrapper of its report script.
    with _wrk_post_script(raw) as script, mock.patch.object(http_load, "WRK_SCRIPT", script):
        return http_load.run(url, **settings)


# --- the measurements ---------------------------------------------------------------------------


def _row(name: str, method: str, target: str, results: list[LoadResult]) -> dict[str, Any]:
    """One measurement from its rounds: requests/second over all of them, the median of the
    rounds' percentiles (percentiles of different runs cannot be merged exactly)."""
    requests_n = sum(r.requests for r in results)
    seconds = sum(r.duration_s for r in results)
    return {
        "name": name,
        "method": method,
        "target": target,
        "connections": results[0].connections,
        "tool": results[0].tool,
        "rounds": len(results),
        "requests": requests_n,
        "rps": requests_n / seconds if seconds > 0 else 0.0,
        "p50_ms": statistics.median(r.p50_ms for r in results),
        "p90_ms": statistics.median(r.p90_ms for r in results),
        "p99_ms": statistics.median(r.p99_ms for r in results),
        "errors": sum(r.errors for r in results),
        "capped": any(r.capped for r in results),
    }


def _smoke(base_url: str, rpc_url: str, deposit: dict, simulate: dict, lat: str, batch) -> None:
    """One request of each kind, checked, before any load: a failing setup is reported as such,
    not measured."""
    answer = requests.post(f"{base_url}/lat/{lat}/simulate-deposit", json=simulate, timeout=30)
    if answer.status_code != 200 or answer.json()["success"] is not True:
        raise RuntimeError(f"simulate-deposit: HTTP {answer.status_code}: {answer.text[:300]}")
    answer = requests.post(f"{base_url}/lat/{lat}/deposit", json=deposit, timeout=30)
    if answer.status_code != 200 or not answer.json()["data"]["transaction"]["data"]:
        raise RuntimeError(f"deposit: HTTP {answer.status_code}: {answer.text[:300]}")
    answer = requests.post(rpc_url, json=batch, timeout=30)
    results = answer.json()
    if not isinstance(results, list) or any("error" in r for r in results):
        raise RuntimeError(f"raw batch: {answer.text[:300]}")
    answer = requests.get(f"{base_url}/bench/baseline", timeout=30)
    if answer.status_code != 200:
        raise RuntimeError(f"baseline: HTTP {answer.status_code} (bench.settings?)")


def run(
    *,
    base_url: str,
    rpc_url: str,
    lat: str,
    assets: Sequence[str],
    amounts: Sequence[int],
    sender: str,
    receiver: str | None = None,
    duration: float = 5.0,
    warmup: float = 1.0,
    latency_connections: Sequence[int] = (1, 4),
    build_connections: int = 6,
    tool: str = "auto",
    threads: int = 1,
    max_requests: int = 0,
    rounds: int = 3,
    log: Callable[[str], None] = print,
) -> list[dict[str, Any]]:
    """Measure; one dict per (endpoint, connections). `sender` must hold and have approved
    `amounts` of `assets` so that the simulated deposit succeeds (a revert is cheaper).

    Each comparison (simulate-deposit and the raw batch at each of `latency_connections`;
    baseline and build at `build_connections`) runs its two sides in `rounds` alternating
    rounds after a warm-up of each; `duration` seconds are measured per side in all."""
    base_url = base_url.rstrip("/")
    deposit, simulate = deposit_bodies(
        assets=assets, amounts=amounts, receiver=receiver or sender, sender=sender
    )
    batch = simulation_batch(
        lat=lat, assets=assets, amounts=amounts, receiver=receiver or sender, sender=sender
    )
    _smoke(base_url, rpc_url, deposit, simulate, lat, batch)

    settings = {"tool": tool, "threads": threads}

    def pair(a: tuple[str, str, str, Any], b: tuple[str, str, str, Any], connections: int):
        """Measure a and b in alternating rounds (a b, b a, a b, ...), so that a change in the
        machine's background load weighs on both alike; one row each."""
        results: dict[str, list[LoadResult]] = {a[0]: [], b[0]: []}
        for _, _, url, body in (a, b):
            if warmup > 0:
                load(url, body=body, duration=warmup, connections=connections, **settings)
        for index in range(rounds):
            for name, _, url, body in (a, b) if index % 2 == 0 else (b, a):
                results[name].append(
                    load(
                        url,
                        body=body,
                        duration=duration / rounds,
                        connections=connections,
                        max_requests=max_requests // rounds,
                        **settings,
                    )
                )
        rows = []
        for name, method, url, _ in (a, b):
            row = _row(name, method, url.removeprefix(base_url), results[name])
            log(
                f"restaking: {name} x{connections}: {row['rps']:,.0f} req/s, "
                f"p50 {row['p50_ms']:.2f} ms, p99 {row['p99_ms']:.2f} ms, {row['errors']} errors"
            )
            rows.append(row)
        return rows

    simulate_spec = ("simulate-deposit", "POST", f"{base_url}/lat/{lat}/simulate-deposit", simulate)
    raw_spec = ("raw JSON-RPC batch", "POST", rpc_url, batch)
    baseline_spec = ("baseline", "GET", f"{base_url}/bench/baseline", None)
    build_spec = ("deposit build", "POST", f"{base_url}/lat/{lat}/deposit", deposit)
    rows = []
    for connections in latency_connections:
        rows += pair(simulate_spec, raw_spec, connections)
    rows += pair(baseline_spec, build_spec, build_connections)
    return rows


def targets(rows: list[dict[str, Any]]) -> list[tuple[str, bool, str]]:
    """(description, met, detail) per target."""
    out = []
    by = {(r["name"], r["connections"]): r for r in rows}
    for (name, connections), row in by.items():
        if name != "simulate-deposit":
            continue
        raw = by.get(("raw JSON-RPC batch", connections))
        if raw is None or not raw["p50_ms"]:
            continue
        factor = row["p50_ms"] / raw["p50_ms"]
        out.append(
            (
                f"simulate-deposit p50 within {MAX_SIMULATE_P50_FACTOR:g}x of the raw batch "
                f"({connections} connection{'s' if connections > 1 else ''})",
                factor <= MAX_SIMULATE_P50_FACTOR,
                f"{factor:.2f}x ({row['p50_ms']:.2f} vs {raw['p50_ms']:.2f} ms)",
            )
        )
    build = next((r for r in rows if r["name"] == "deposit build"), None)
    baseline = next((r for r in rows if r["name"] == "baseline"), None)
    if build and baseline and baseline["rps"]:
        ratio = build["rps"] / baseline["rps"]
        out.append(
            (
                f"deposit build >= {MIN_BUILD_RATIO:.0%} of baseline req/s",
                ratio >= MIN_BUILD_RATIO,
                f"{ratio:.0%} ({build['rps']:,.0f} vs {baseline['rps']:,.0f} req/s)",
            )
        )
    return out


# --- the bench/run.py section: everything set up here --------------------------------------------


def _manage(env: dict[str, str], *args: str) -> None:
    from bench.config import PYTHON, REPO

    result = subprocess.run(
        [PYTHON, "manage.py", *args], cwd=REPO, env=env, capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        raise RuntimeError(f"manage.py {' '.join(args)} failed:\n{result.stdout}{result.stderr}")


def _fund(rpc_url: str, manifest: dict[str, Any], sender_index: int, amounts: Sequence[int]) -> str:
    """Mint the sender plenty of each token and approve the LAT for all of it."""
    from devchain.devnet import connect, contract

    w3 = connect(rpc_url)
    sender = w3.to_checksum_address(w3.eth.accounts[sender_index])
    for token_ref, amount in zip(manifest["tokens"], amounts, strict=False):
        token = contract(w3, "TestERC20", token_ref["address"])
        for call in (
            token.functions.mint(sender, amount * 1_000_000),
            token.functions.approve(manifest["proxyAddress"], 2**256 - 1),
        ):
            receipt = w3.eth.wait_for_transaction_receipt(call.transact({"from": sender}))
            if receipt["status"] != 1:
                raise RuntimeError(f"funding the bench sender failed: {receipt}")
    return sender


def section(ctx):
    """bench/run.py section: set up anvil, a database and a server of its own, then `run`."""
    from bench.config import with_database
    from bench.context import SectionResult, Target
    from bench.dataset import ensure_database, migrate
    from devchain.anvil import start_anvil
    from devchain.devnet import deploy_devnet, write_manifests

    result = SectionResult(
        name="restaking",
        title=TITLE,
        columns=[
            "measurement",
            "conns",
            "req/s",
            "p50 ms",
            "p90 ms",
            "p99 ms",
            "requests",
            "errors",
        ],
    )
    started = time.monotonic()
    node = start_anvil(reuse=False)
    try:
        manifests = deploy_devnet(node.url)
        manifest = next(m for m in manifests if m["symbol"] == LAT_SYMBOL)
        db_url = with_database(ctx.env["DATABASE_URL"], BENCH_DB)
        ensure_database(db_url, recreate=True)
        env = {**ctx.env, "DATABASE_URL": db_url, "RPC_URL": node.url}
        migrate(db_url, env)
        with tempfile.TemporaryDirectory(prefix="lat-bench-manifests-") as tmp:
            (path,) = write_manifests([manifest], tmp)
            _manage(env, "lat_import", str(path))
        _manage(env, "lat_sync", "--lat", manifest["proxyAddress"], "--no-progress")
        tokens = [t["address"] for t in manifest["tokens"]]
        amounts = [WAD, 2_500_000][: len(tokens)]  # 1 stETH (18 decimals), 2.5 cbETH (6)
        sender = _fund(node.url, manifest, SENDER_INDEX, amounts)
        ctx.log(
            f"restaking: devnet, {BENCH_DB} and sender ready in {time.monotonic() - started:.0f} s"
        )
        with ctx.server(DATABASE_URL=db_url, RPC_URL=node.url) as server:
            rows = run(
                base_url=server.url(""),
                rpc_url=node.url,
                lat=manifest["proxyAddress"],
                assets=tokens,
                amounts=amounts,
                sender=sender,
                duration=ctx.args.duration,
                warmup=ctx.args.warmup,
                latency_connections=(1, 4),
                build_connections=ctx.args.connections,
                tool=ctx.args.loadgen,
                threads=ctx.args.threads,
                max_requests=ctx.args.max_requests,
                log=ctx.log,
            )
    except Exception as exc:  # a failed setup or smoke check is a failure line, not a crash
        result.failures.append(f"restaking: {type(exc).__name__}: {exc}")
        return result
    finally:
        node.stop()
    for row in rows:
        result.rows.append(
            [
                f"{row['name']}  {row['method']} {row['target'][:40]}",
                str(row["connections"]),
                f"{row['rps']:,.0f}",
                f"{row['p50_ms']:.2f}",
                f"{row['p90_ms']:.2f}",
                f"{row['p99_ms']:.2f}",
                f"{row['requests']:,}" + (" (cap)" if row["capped"] else ""),
                str(row["errors"]),
            ]
        )
        if row["errors"]:
            result.failures.append(f"{row['name']} x{row['connections']}: {row['errors']} errors")
    result.targets.extend(Target(d, met, detail) for d, met, detail in targets(rows))
    result.notes.append(
        f"  simulate-deposit: {len(tokens)} assets, one JSON-RPC batch (eth_call, eth_estimateGas,"
        " eth_gasPrice) per request; the raw batch is that batch sent straight to anvil."
    )
    return result


def main(argv: list[str] | None = None) -> int:
    from bench import config, report
    from bench.context import Context, log

    parser = argparse.ArgumentParser(prog="bench/direct_restaking.py", description=__doc__)
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--connections", type=int, default=0, help="default 2 x workers")
    parser.add_argument("--max-requests", type=int, default=200_000)
    parser.add_argument("--loadgen", choices=("auto", "wrk", "python"), default="auto")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    args.connections = args.connections or 2 * args.workers
    if args.loadgen == "auto":
        args.loadgen = "wrk" if http_load.wrk_available() else "python"
    env = config.base_env()
    db_url = config.with_database(env["DATABASE_URL"], BENCH_DB)
    ctx = Context(args=args, env=env, db_url=db_url, log=log)
    result = section(ctx)
    print(report.section(result))
    return 1 if result.failures else 0


if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "latsite.settings")
    sys.exit(main())
