"""Section `freshness`: seconds from a deposit's confirmation to its first appearance in
GET /metrics/deposits, with the Procfile's processes running (web, worker, beat, follower) beside
web, beat and worker only (the beat's deposit indexing every 30 s). On anvil with the devnet
(latETH imported and synced), confirmation depth CONFIRMATIONS: each deposit is followed by
`evm_mine` until it is that deep, and the clock starts when the confirming block is mined (as
tests/e2e/test_freshness.py does); a thread polls the API every POLL s with If-None-Match."""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import requests

from bench import PYTHON, rpc
from bench.context import NO_LIMIT, Context, Processes, SectionResult, wait_until
from bench.load import percentile
from devchain.anvil import free_port

TITLE = "Deposit freshness: confirmation to GET /metrics/deposits (Procfile vs beat + worker)"
CHAIN_ID, CONFIRMATIONS = 31337, 2
DEPOSITS = 20
SPACING = 1.0  # seconds from one deposit's start to the next one's
POLL = 0.05  # seconds between two API polls
TARGET_P95 = 2.0
WALLET, AMOUNT = 12, 2 * 10**18  # anvil account making the deposits, and each one's amount
WARMUP_TIMEOUT = 120.0  # a first deposit must be listed within this (processes starting)
RUNS = (  # label, Procfile processes, seconds to wait after the last confirmation
    ("A: Procfile (web, worker, beat, follower)", ("web", "worker", "beat", "follower"), 30.0),
    ("B: beat + worker only (today's path)", ("web", "worker", "beat"), 75.0),
)
COLUMNS = ["run", "deposits", "listed", "p50 s", "p95 s", "max s", "receipt p50 s", "receipt max s"]


def run(ctx: Context, result: SectionResult) -> None:
    result.columns, figures = COLUMNS, {}
    with ctx.devnet("freshness", synced=True) as (rpc_url, manifest, db_url):
        env = {**ctx.env, "PATH": f"{Path(PYTHON).parent}{os.pathsep}{os.environ['PATH']}"}
        env |= {"DATABASE_URL": db_url, "RPC_URL": rpc_url, "LOG_LEVEL": "WARNING"}
        env |= {f"CHAIN_CONFIRMATIONS_{CHAIN_ID}": str(CONFIRMATIONS), "DJANGO_DEBUG": "false"}
        env |= {"DJANGO_SETTINGS_MODULE": "latsite.settings", "SECURE_SSL_REDIRECT": "false"}
        env |= {"ALLOWED_HOSTS": "127.0.0.1,localhost", "PORT": str(free_port())}
        env |= {"WEB_CONCURRENCY": "2", "RATE_LIMIT_ANON": NO_LIMIT, "RATE_LIMIT_KEYED": NO_LIMIT}
        for label, names, wait in RUNS:
            ctx.log(f"freshness: run {label}")
            try:
                figures[label] = _run_once(ctx, env, (rpc_url, manifest), names, wait)
            except RuntimeError as exc:
                result.failures.append(f"{label}: {exc}")
    for label, _, _ in RUNS:
        _report(result, label, figures.get(label))
    conf = figures.get(RUNS[0][0], {}).get("from_confirmation")
    description = f"run A (Procfile) p95 at most {TARGET_P95:g} s from confirmation to listing"
    if not conf or len(conf) != figures[RUNS[0][0]]["made"]:
        result.target(description, 0, "not every deposit was listed", also=False)
    else:
        p95 = percentile(conf, 0.95)
        result.target(description, p95, f"p95 {p95:.2f} s", at_most=TARGET_P95)
    result.notes.append(
        f"Each run: {DEPOSITS} deposits of latETH about {SPACING:g} s apart (1 warm-up deposit "
        f"first, not counted), chain {CHAIN_ID} at {CONFIRMATIONS} confirmations, anvil mining "
        f"on demand; p50/p95/max from the moment the confirming block was mined to the first API "
        f"answer listing it (nearest rank; polls every {POLL * 1000:.0f} ms); 'receipt' columns "
        "from the deposit's receipt. Run B keeps the default beat schedule (deposits every 30 s): "
        "its figures depend on where the deposits fall in that period."
    )


def _deposit(chain: tuple[str, dict]) -> tuple[str, float, float]:
    """One deposit of latETH's first token, mined CONFIRMATIONS deep: (tx hash, when its receipt
    came, when the confirming block was mined)."""
    from devchain.devnet import make_deposits

    (url, manifest), session = chain, requests.Session()
    token = manifest["tokens"][0]["address"]
    done = make_deposits(url, manifest, WALLET, [token], [AMOUNT])
    receipt = time.monotonic()
    depth = done["blockNumber"] + CONFIRMATIONS
    while int(rpc(url, "eth_blockNumber", session=session), 16) < depth:
        rpc(url, "evm_mine", session=session)
    return done["txHash"].lower(), receipt, time.monotonic()


def _watch(url: str, seen: dict[str, float], errors: list, halt: threading.Event) -> int:
    """Poll `url` every POLL s with If-None-Match until `halt`, noting in `seen` when each
    transaction hash was first listed: the number of polls."""
    session, etag, polls = requests.Session(), None, 0
    while not halt.wait(POLL):
        try:
            response = session.get(url, headers={"If-None-Match": etag} if etag else {}, timeout=10)
            now, polls = time.monotonic(), polls + 1
            if response.status_code == 200:
                etag = response.headers.get("ETag")
                for row in response.json()["data"]:
                    seen.setdefault(row["transactionHash"].lower(), now)
            elif response.status_code != 304:
                errors.append(f"HTTP {response.status_code}: {response.text[:200]}")
        except requests.RequestException as exc:
            errors.append(str(exc))
    return polls


def _run_once(ctx: Context, env: dict, chain: tuple, names: tuple, wait: float) -> dict:
    """The Procfile's processes `names` up, one warm-up deposit listed, then DEPOSITS deposits
    SPACING s apart: each one's receipt, confirmation and first listing."""
    base, seen, errors, halt = f"http://127.0.0.1:{env['PORT']}", {}, [], threading.Event()
    with Processes(ctx.log) as procs, ThreadPoolExecutor(1) as pool:
        procs.procfile(names, env)

        def health() -> bool:
            return requests.get(f"{base}/health", timeout=2).status_code == 200

        if not wait_until(health, 90, procs.dead):
            raise RuntimeError("web did not answer /health within 90 s")
        polls = pool.submit(_watch, f"{base}/metrics/deposits?take=100", seen, errors, halt)
        try:
            tx = _deposit(chain)[0]
            if not wait_until(lambda: tx in seen, WARMUP_TIMEOUT, procs.dead, POLL):
                raise RuntimeError(f"the warm-up deposit was not listed in {WARMUP_TIMEOUT:.0f} s")
            deposits = []
            for _ in range(DEPOSITS):
                began = time.monotonic()
                deposits.append(_deposit(chain))
                time.sleep(max(0.0, SPACING - (time.monotonic() - began)))
            wait_until(lambda: all(d[0] in seen for d in deposits), wait, procs.dead, POLL)
        finally:
            halt.set()
    listed = [(seen[tx], r, c) for tx, r, c in deposits if tx in seen]
    return {
        "from_confirmation": [at - c for at, _, c in listed],
        "from_receipt": [at - r for at, r, _ in listed],
        "made": len(deposits),
        "polls": polls.result(),
        "errors": errors,
    }


def _report(result: SectionResult, label: str, fig: dict | None) -> None:
    """The run's row, its latencies in the notes, and a failure for any deposit not listed, or
    listed before its confirmation, or any failed poll."""
    if fig is None:
        result.rows.append([label, "-", "-", "-", "-", "-", "-", "-"])
        return
    conf, rec = fig["from_confirmation"], fig["from_receipt"]
    row = [label, str(fig["made"]), str(len(conf))]
    row += [f"{percentile(conf, q):.2f}" for q in (0.50, 0.95, 1.0)] if conf else ["-"] * 3
    row += [f"{percentile(rec, q):.2f}" for q in (0.50, 1.0)] if conf else ["-"] * 2
    result.rows.append(row)
    if fig["made"] != len(conf):
        result.failures.append(f"{label}: {fig['made'] - len(conf)} deposit(s) never listed")
    if early := [v for v in conf if v < 0]:
        result.failures.append(f"{label}: {len(early)} deposit(s) listed before confirmation")
    if fig["errors"]:
        result.failures.append(f"{label}: {len(fig['errors'])} failed polls: {fig['errors'][:3]}")
    runs = ", ".join(f"{v:.2f}" for v in conf)
    result.notes.append(f"{label}: {fig['polls']} polls; seconds from confirmation: {runs}")
