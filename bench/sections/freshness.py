"""Section `freshness`: seconds from a deposit's confirmation to its first appearance in
GET /metrics/deposits, with the Procfile's processes running (web, worker, beat, follower) beside
the same with only web, beat and worker (the beat's deposit indexing every 30 s).

On anvil with the devnet (`ctx.devnet`, database `<db-name>_freshness_bench`, latETH imported and
synced once), the processes start as the Procfile lists them, each in its own process group
(`sh -c "exec <Procfile command>"`, the venv's bin first on PATH), with the chain's
confirmation depth CONFIRMATIONS (CHAIN_CONFIRMATIONS_31337). anvil mines on demand: each
deposit (make_deposits: mint, approve, deposit, one block each) is followed by `evm_mine` until
its block is CONFIRMATIONS deep, and the clock starts when the call that mined the confirming
block returns (as tests/e2e/test_freshness.py does). A thread polls the API every POLL seconds
with If-None-Match and notes when each transaction hash is first listed.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import requests

from bench import PYTHON, REPO, rpc
from bench.context import Context, Processes, SectionResult, wait_until
from bench.load import percentile
from devchain.anvil import free_port

TITLE = "Deposit freshness: confirmation to GET /metrics/deposits (Procfile vs beat + worker)"
CHAIN_ID = 31337
CONFIRMATIONS = 2
DEPOSITS = 20
SPACING = 1.0  # seconds from one deposit's start to the next one's
POLL = 0.05  # seconds between two API polls
TARGET_P95 = 2.0
WALLET = 12  # anvil account making the deposits
AMOUNT = 2 * 10**18
WARMUP_TIMEOUT = 120.0  # a first deposit must be listed within this (processes starting)
RUNS = (  # label, Procfile processes, seconds to wait after the last confirmation
    ("A: Procfile (web, worker, beat, follower)", ("web", "worker", "beat", "follower"), 30.0),
    ("B: beat + worker only (today's path)", ("web", "worker", "beat"), 75.0),
)
COLUMNS = ["run", "deposits", "listed", "p50 s", "p95 s", "max s", "receipt p50 s", "receipt max s"]


def run(ctx: Context, result: SectionResult) -> None:
    result.columns = COLUMNS
    ctx.log("freshness: deploying the devnet…")
    with ctx.devnet("freshness", synced=True) as (rpc_url, manifest, db_url):
        env, chain, figures = _environment(ctx, rpc_url, db_url), Chain(rpc_url, manifest), {}
        for label, names, wait in RUNS:
            ctx.log(f"freshness: run {label}")
            try:
                figures[label] = _run_once(ctx, env, chain, names, wait)
            except RuntimeError as exc:
                result.failures.append(f"{label}: {exc}")
    _report(result, figures)


def _environment(ctx: Context, rpc_url: str, db_url: str) -> dict[str, str]:
    """The processes' environment: the bench's, on the section's database and the devnet."""
    return {
        **ctx.env, "PATH": f"{Path(PYTHON).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "DATABASE_URL": db_url, "RPC_URL": rpc_url, "LOG_LEVEL": "WARNING",
        f"CHAIN_CONFIRMATIONS_{CHAIN_ID}": str(CONFIRMATIONS),
        "DJANGO_SETTINGS_MODULE": "latsite.settings", "DJANGO_DEBUG": "false",
        "SECURE_SSL_REDIRECT": "false", "ALLOWED_HOSTS": "127.0.0.1,localhost",
        "WEB_CONCURRENCY": "2",  # the Procfile's gthread workers (x 8 threads)
        "PORT": str(free_port()),
        # One client polling 20 times a second must never be answered 429.
        "RATE_LIMIT_ANON": "1000000000/s", "RATE_LIMIT_KEYED": "1000000000/s",
    }  # fmt: skip


# --- the chain -----------------------------------------------------------------------------


@dataclass
class Chain:
    url: str
    manifest: dict
    session: requests.Session = field(default_factory=requests.Session)

    def rpc(self, method: str, *params: object) -> object:
        return rpc(self.url, method, *params, session=self.session, timeout=30)

    def deposit(self) -> tuple[str, int, float]:
        """One deposit of the LAT's first token: (tx hash, block, when its receipt came)."""
        from devchain.devnet import make_deposits

        token = self.manifest["tokens"][0]["address"]
        done = make_deposits(self.url, self.manifest, WALLET, [token], [AMOUNT])
        return done["txHash"].lower(), done["blockNumber"], time.monotonic()

    def confirm(self, block: int) -> float:
        """Mine until `block` is CONFIRMATIONS deep; the moment the confirming block was mined."""
        while int(str(self.rpc("eth_blockNumber")), 16) < block + CONFIRMATIONS:
            self.rpc("evm_mine")
        return time.monotonic()


# --- the client ----------------------------------------------------------------------------


class Watcher(threading.Thread):
    """Polls GET /metrics/deposits?take=100 every POLL s with If-None-Match; `seen` maps each
    transaction hash to the moment (monotonic) of the first answer that listed it."""

    def __init__(self, base_url: str) -> None:
        super().__init__(daemon=True)
        self.url = f"{base_url}/metrics/deposits?take=100"
        self.seen: dict[str, float] = {}
        self.errors: list[str] = []
        self.polls = 0
        self.halt = threading.Event()

    def run(self) -> None:
        session, etag = requests.Session(), None
        while not self.halt.is_set():
            try:
                headers = {"If-None-Match": etag} if etag else {}
                response = session.get(self.url, headers=headers, timeout=10)
                now = time.monotonic()
                self.polls += 1
                if response.status_code == 200:
                    etag = response.headers.get("ETag")
                    for row in response.json()["data"]:
                        self.seen.setdefault(row["transactionHash"].lower(), now)
                elif response.status_code != 304:
                    self.errors.append(f"HTTP {response.status_code}: {response.text[:200]}")
            except requests.RequestException as exc:
                self.errors.append(str(exc))
            self.halt.wait(POLL)


# --- one run -------------------------------------------------------------------------------


def _run_once(ctx: Context, env: dict, chain: Chain, names: tuple, wait: float) -> dict:
    """The Procfile's processes `names` up (web bound to 127.0.0.1, not 0.0.0.0), one warm-up
    deposit listed, then DEPOSITS deposits SPACING s apart; each deposit's receipt,
    confirmation and first listing."""
    base_url, lines = f"http://127.0.0.1:{env['PORT']}", (REPO / "Procfile").read_text()
    procfile = dict(line.split(": ", 1) for line in lines.splitlines() if ": " in line)
    with Processes(ctx.log) as procs:
        for name in names:
            command = procfile[name].strip().replace("0.0.0.0", "127.0.0.1")
            process = procs.start(name, ["/bin/sh", "-c", f"exec {command}"], env)
            ctx.log(f"freshness: {name} pid {process.pid}: {command}")
        health = f"{base_url}/health"
        if not wait_until(
            lambda: requests.get(health, timeout=2).status_code == 200, 90, procs.dead
        ):
            raise RuntimeError("web did not answer /health within 90 s")
        watcher = Watcher(base_url)
        watcher.start()
        try:
            tx, block, _ = chain.deposit()
            chain.confirm(block)
            if not wait_until(lambda: tx in watcher.seen, WARMUP_TIMEOUT, procs.dead, POLL):
                raise RuntimeError(f"the warm-up deposit was not listed in {WARMUP_TIMEOUT:.0f} s")
            ctx.log("freshness: warm-up deposit listed; measuring")
            deposits = []
            for _ in range(DEPOSITS):
                began = time.monotonic()
                tx, block, receipt = chain.deposit()
                deposits.append((tx, receipt, chain.confirm(block)))
                time.sleep(max(0.0, SPACING - (time.monotonic() - began)))
            wait_until(lambda: all(d[0] in watcher.seen for d in deposits), wait, procs.dead, POLL)
        finally:
            watcher.halt.set()
            watcher.join(timeout=15)
    return {
        "from_confirmation": [watcher.seen[tx] - c for tx, _, c in deposits if tx in watcher.seen],
        "from_receipt": [watcher.seen[tx] - r for tx, r, _ in deposits if tx in watcher.seen],
        "made": len(deposits), "polls": watcher.polls, "errors": watcher.errors,
    }  # fmt: skip


# --- the report ----------------------------------------------------------------------------


def _report(result: SectionResult, figures: dict[str, dict]) -> None:
    for label, _, _ in RUNS:
        fig = figures.get(label)
        if fig is None:
            result.rows.append([label, "-", "-", "-", "-", "-", "-", "-"])
            continue
        conf, rec = fig["from_confirmation"], fig["from_receipt"]
        row = [label, str(fig["made"]), str(len(conf))]
        if conf:
            row += [f"{percentile(conf, q):.2f}" for q in (0.50, 0.95, 1.0)]
            row += [f"{percentile(rec, q):.2f}" for q in (0.50, 1.0)]
        else:
            row += ["-"] * 5
        result.rows.append(row)
        if fig["made"] != len(conf):
            result.failures.append(f"{label}: {fig['made'] - len(conf)} deposit(s) never listed")
        if early := [v for v in conf if v < 0]:
            result.failures.append(f"{label}: {len(early)} deposit(s) listed before confirmation")
        if fig["errors"]:
            result.failures.append(
                f"{label}: {len(fig['errors'])} failed polls: {fig['errors'][:3]}"
            )
        runs = ", ".join(f"{v:.2f}" for v in conf)
        result.notes.append(f"{label}: {fig['polls']} polls; seconds from confirmation: {runs}")
    _target(result, figures.get(RUNS[0][0]))
    result.notes.append(
        f"Each run: {DEPOSITS} deposits of latETH about {SPACING:g} s apart (1 warm-up deposit "
        f"first, not counted), chain {CHAIN_ID} at {CONFIRMATIONS} confirmations, anvil mining "
        f"on demand (evm_mine after each deposit until it is {CONFIRMATIONS} deep); p50/p95/max "
        f"from the moment the confirming block was mined to the first API answer listing it "
        f"(nearest rank; polls every {POLL * 1000:.0f} ms); 'receipt' columns from the deposit's "
        f"receipt. Run B keeps the default beat schedule (deposits every 30 s): its figures "
        f"depend on where the deposits fall in that period."
    )


def _target(result: SectionResult, fig: dict | None) -> None:
    description = f"run A (Procfile) p95 at most {TARGET_P95:g} s from confirmation to listing"
    conf = fig["from_confirmation"] if fig else []
    if not conf or len(conf) != fig["made"]:
        result.target(description, 0, "not every deposit was listed", also=False)
        return
    p95 = percentile(conf, 0.95)
    result.target(description, p95, f"p95 {p95:.2f} s", at_most=TARGET_P95)
