"""Section `freshness`: seconds from a deposit's confirmation to its listing in GET
/metrics/deposits, with the Procfile's processes polling the head (A: p95 at most 1 s), with a
WebSocket node pushing new heads (W: WS_URL set, p95 at most 0.5 s), and without the follower."""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import requests

from bench import PYTHON, rpc
from bench.context import HOST, NO_LIMIT, Context, Processes, SectionResult, wait_until
from bench.load import percentile
from devchain.anvil import free_port

TITLE = "Deposit freshness: confirmation to GET /metrics/deposits (Procfile vs beat + worker)"
CHAIN_ID, CONFIRMATIONS, DEPOSITS, SPACING, POLL = 31337, 2, 20, 1.0, 0.05
WALLET, AMOUNT = 12, 2 * 10**18  # anvil account making the deposits, and each one's amount
PROCFILE = ("web", "worker", "beat", "follower")
RUNS = (  # label, Procfile processes, seconds to wait after the last confirmation, WebSocket
    ("A: Procfile, polling the head", PROCFILE, 30.0, False),
    ("W: Procfile, WS_URL set (new heads pushed)", PROCFILE, 30.0, True),
    ("B: beat + worker only (today's path)", ("web", "worker", "beat"), 75.0, False),
)
TARGETS = {RUNS[0][0]: 1.0, RUNS[1][0]: 0.5}  # p95 s from confirmation to listing
COLUMNS = ["run", "deposits", "listed", "p50 s", "p95 s", "max s", "receipt p50 s", "receipt max s"]


def run(ctx: Context, result: SectionResult) -> None:
    result.columns = COLUMNS
    with ctx.devnet("freshness", synced=True) as (rpc_url, manifest, db_url):
        env = {**ctx.env, "PATH": f"{Path(PYTHON).parent}{os.pathsep}{os.environ['PATH']}"}
        env |= {"DATABASE_URL": db_url, "RPC_URL": rpc_url, "LOG_LEVEL": "WARNING"}
        env |= {f"CHAIN_CONFIRMATIONS_{CHAIN_ID}": str(CONFIRMATIONS), "PORT": str(free_port())}
        env |= {"ALLOWED_HOSTS": "127.0.0.1,localhost"}
        env |= {"WEB_CONCURRENCY": "2", "RATE_LIMIT_ANON": NO_LIMIT, "RATE_LIMIT_KEYED": NO_LIMIT}
        for label, names, wait, websocket in RUNS:
            ctx.log(f"freshness: run {label}")
            run_env = env | (websocket_env(rpc_url) if websocket else {})
            try:
                _run_once(ctx, result, label, run_env, (rpc_url, manifest), names, wait)
            except RuntimeError as exc:
                result.failures.append(f"{label}: {exc}")
                result.rows.append([label, *["-"] * 7])
    for label, limit in TARGETS.items():
        description = f"{label.split(':')[0]} p95 at most {limit:g} s from confirmation"
        if not any(description in target for target in result.targets):
            result.target(description, 0, "not every deposit was listed", also=False)
    result.notes.append(
        f"Each run: {DEPOSITS} deposits of latETH about {SPACING:g} s apart (1 warm-up deposit "
        f"first, not counted), chain {CHAIN_ID} at {CONFIRMATIONS} confirmations, anvil mining "
        f"on demand; p50/p95/max from the moment the confirming block was mined to the first API "
        f"answer listing it (nearest rank; polls every {POLL * 1000:.0f} ms); 'receipt' columns "
        "from the deposit's receipt. Run B keeps the default beat schedule (deposits every 30 s): "
        "its figures depend on where the deposits fall in that period."
    )


def websocket_env(rpc_url: str) -> dict[str, str]:
    """WS_URL_<chainId> at the anvil's WebSocket endpoint (its HTTP port): new heads pushed."""
    return {f"WS_URL_{CHAIN_ID}": rpc_url.replace("http", "ws", 1)}


def follow_websocket(procs: Processes, env: dict[str, str], rpc_url: str) -> None:
    """The Procfile's follower stopped and started again with WS_URL set (`websocket_env`):
    the `stream` and `webhooks` sections' run W, beside their run with the head polled."""
    procs.stop("follower")
    procs.procfile(("follower",), env | websocket_env(rpc_url))


def _deposit(chain: tuple[str, dict]) -> tuple[str, float, float]:
    """One deposit of latETH's first token, mined CONFIRMATIONS deep: (tx hash, when its receipt
    came, when the confirming block was mined)."""
    from devchain.devnet import make_deposits

    (url, manifest), session = chain, requests.Session()
    done = make_deposits(url, manifest, WALLET, [manifest["tokens"][0]["address"]], [AMOUNT])
    receipt, depth = time.monotonic(), done["blockNumber"] + CONFIRMATIONS
    while int(rpc(url, "eth_blockNumber", session=session), 16) < depth:
        rpc(url, "evm_mine", session=session)
    return done["txHash"].lower(), receipt, time.monotonic()


def _watch(url: str, seen: dict[str, float], errors: list, halt: threading.Event) -> int:
    """Poll `url` every POLL s with If-None-Match until `halt`, noting in `seen` when each
    transaction hash was first listed: the number of polls."""
    session, etag, polls = requests.Session(), "", 0
    while not halt.wait(POLL):
        try:
            headers = {"If-None-Match": etag} if etag else {}
            response = session.get(url, headers=headers, timeout=10)
            now, polls = time.monotonic(), polls + 1
            if response.status_code == 200:
                etag = response.headers.get("ETag", "")
                for row in response.json()["data"]:
                    seen.setdefault(row["transactionHash"].lower(), now)
            elif response.status_code != 304:
                errors.append(f"HTTP {response.status_code}: {response.text[:200]}")
        except requests.RequestException as exc:
            errors.append(str(exc))
    return polls


def _run_once(ctx, result, label: str, env: dict, chain: tuple, names, wait: float) -> None:
    """The Procfile's processes `names` up (web on 127.0.0.1), one warm-up deposit listed, then
    DEPOSITS deposits SPACING s apart: the run's row, latencies, failures and target."""
    base, seen, errors, halt = f"http://{HOST}:{env['PORT']}", {}, [], threading.Event()
    with Processes(ctx.log) as procs, ThreadPoolExecutor(1) as pool:
        procs.procfile(names, env)

        def health() -> bool:
            return requests.get(f"{base}/health", timeout=2).status_code == 200

        if not wait_until(health, 90, procs.dead):
            raise RuntimeError("web did not answer /health within 90 s")
        polls = pool.submit(_watch, f"{base}/metrics/deposits?take=100", seen, errors, halt)
        try:
            tx = _deposit(chain)[0]
            if not wait_until(lambda: tx in seen, 120, procs.dead, POLL):
                raise RuntimeError("the warm-up deposit was not listed in 120 s")
            deposits = []
            for _ in range(DEPOSITS):
                began = time.monotonic()
                deposits.append(_deposit(chain))
                time.sleep(max(0.0, SPACING - (time.monotonic() - began)))
            wait_until(lambda: all(d[0] in seen for d in deposits), wait, procs.dead, POLL)
        finally:
            halt.set()
    conf = [seen[tx] - c for tx, _, c in deposits if tx in seen]
    receipt = [seen[tx] - r for tx, r, _ in deposits if tx in seen]
    row = [label, str(DEPOSITS), str(len(conf))]
    row += [f"{percentile(conf, q):.2f}" for q in (0.50, 0.95, 1.0)] if conf else ["-"] * 3
    row += [f"{percentile(receipt, q):.2f}" for q in (0.50, 1.0)] if conf else ["-"] * 2
    result.rows.append(row)
    latencies = ", ".join(f"{v:.2f}" for v in conf)
    result.notes.append(f"{label}: {polls.result()} polls; seconds from confirmation: {latencies}")
    if DEPOSITS != len(conf):
        result.failures.append(f"{label}: {DEPOSITS - len(conf)} deposit(s) never listed")
    if early := [v for v in conf if v < 0]:
        result.failures.append(f"{label}: {len(early)} deposit(s) listed before confirmation")
    if errors:
        result.failures.append(f"{label}: {len(errors)} failed polls: {errors[:3]}")
    if label in TARGETS and len(conf) == DEPOSITS:
        limit = TARGETS[label]
        description = f"{label.split(':')[0]} p95 at most {limit:g} s from confirmation"
        p95 = percentile(conf, 0.95)
        result.target(description, p95, f"p95 {p95:.2f} s", at_most=limit)
