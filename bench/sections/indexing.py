"""Section `indexing`: deposits indexed per second, beside the ceiling of the same work
without a database.

An anvil chain with the demo LATs and N `AssetDeposited` events (100,000 by default) on one LAT
is built for the run (about a minute per 100,000 events). A fresh
database (`<bench db>_index`) is migrated, then bench/index_probe.py, in its own process,
times the plain `eth_getLogs` + ABI decoding of the events (the ceiling) and the service's
indexer (`deposit_index`: the same logs, decoded, dated, checkpointed and written), twice each.
"""

from __future__ import annotations

import json
import subprocess
import time

import psycopg

from bench.config import PYTHON, REPO, database_name, libpq_url, with_database
from bench.context import Context, SectionResult, Target

TITLE = "Deposit indexing on anvil (events per second)"
MIN_RATIO = 0.50
LAT_SYMBOL = "latETH"


def _chain(ctx: Context, events: int):
    """A fresh anvil with the devnet and `events` deposits on LAT_SYMBOL (about a minute per
    100,000 events: anvil runs every deposit; its saved state would be gigabytes)."""
    from devchain.anvil import start_anvil
    from devchain.devnet import deploy_devnet, deposit_many

    directory = REPO / "var" / "bench"
    directory.mkdir(parents=True, exist_ok=True)
    manifest_file = directory / f"index-{LAT_SYMBOL}.json"
    node = start_anvil()
    ctx.log(f"indexing: deploying the devnet and emitting {events} deposit events…")
    began = time.perf_counter()
    manifest = next(m for m in deploy_devnet(node.url) if m["symbol"] == LAT_SYMBOL)
    deposit_many(node.url, manifest, events, per_tx=100)
    manifest_file.write_text(json.dumps(manifest))
    ctx.log(f"indexing: chain built in {time.perf_counter() - began:.0f} s")
    return node, manifest_file


def _fresh_database(ctx: Context) -> str:
    url = with_database(ctx.db_url, database_name(ctx.db_url) + "_index")
    name = database_name(url)
    with psycopg.connect(libpq_url(ctx.db_url), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')
    subprocess.run(
        [PYTHON, "manage.py", "migrate", "--noinput", "-v", "0"],
        cwd=REPO,
        env={**ctx.env, "DATABASE_URL": url},
        check=True,
    )
    return url


def run(ctx: Context) -> SectionResult:
    events = getattr(ctx.args, "index_events", 100_000)
    span = getattr(ctx.args, "index_range", 5000)
    result = SectionResult(
        name="indexing",
        title=TITLE,
        columns=["measure", "events", "seconds (best of 2)", "events/s", "vs ceiling"],
    )
    node, manifest_file = _chain(ctx, events)
    try:
        url = _fresh_database(ctx)
        probe = subprocess.run(
            [
                PYTHON,
                "bench/index_probe.py",
                "--rpc",
                node.url,
                "--manifest",
                str(manifest_file),
                "--range",
                str(span),
            ],
            cwd=REPO,
            env={**ctx.env, "DATABASE_URL": url, "LOG_LEVEL": "WARNING", "RPC_TIMEOUT": "300"},
            capture_output=True,
            text=True,
            check=False,
        )
    finally:
        node.stop()
    if probe.returncode != 0:
        result.failures.append(f"indexing probe failed: {probe.stderr[-2000:]}")
        return result
    figures = json.loads(probe.stdout.strip().splitlines()[-1])
    ceiling = min(figures["ceiling"], key=lambda r: r["seconds"])
    indexer = min(figures["indexer"], key=lambda r: r["seconds"])
    if indexer["events"] != ceiling["events"] or indexer["events"] < events:
        result.failures.append(
            f"indexer stored {indexer['events']} deposits; the chain has {ceiling['events']}"
        )
    ceiling_rate = ceiling["events"] / ceiling["seconds"]
    indexer_rate = indexer["events"] / indexer["seconds"]
    ratio = indexer_rate / ceiling_rate
    result.rows = [
        [
            "eth_getLogs + ABI decode (ceiling)",
            str(ceiling["events"]),
            f"{ceiling['seconds']:.2f}",
            f"{ceiling_rate:,.0f}",
            "1.00",
        ],
        [
            "deposit_index (service)",
            str(indexer["events"]),
            f"{indexer['seconds']:.2f}",
            f"{indexer_rate:,.0f}",
            f"{ratio:.2f}",
        ],
    ]
    result.targets.append(
        Target(
            f"indexer at least {MIN_RATIO:.0%} of the ceiling",
            ratio >= MIN_RATIO,
            f"{ratio:.0%}",
        )
    )
    result.notes.append(
        f"block range {span}; runs: ceiling "
        + ", ".join(f"{r['seconds']:.2f}s" for r in figures["ceiling"])
        + "; indexer "
        + ", ".join(f"{r['seconds']:.2f}s" for r in figures["indexer"])
    )
    return result
