"""Section `indexing`: a backfill. A new LAT's 100,000 historical deposits (each an
`AssetDeposited` and the mint `Transfer` of its shares: 200,000 events) indexed by
`deposit_index` into a database that already holds the bench data set's 1,000,000 deposits of
another chain at higher block numbers, beside the ceiling of reading the same logs: plain
`eth_getLogs` over the same block ranges, the JSON parsed, no database.

The database (`lat_indexing_bench`) is seeded once with the data set (bench/dataset.py) and
kept; the probe deletes the devnet's LAT from it when it ends. This module runs again as a
script, in its own process with Django on that database, to time both twice.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import PYTHON, REPO, dataset
from bench.context import Context, SectionResult, Target

TITLE = "Backfill of a new LAT beside 1,000,000 stored deposits, on anvil (events per second)"
MIN_RATIO = 0.50
BENCH_DB = "lat_indexing_bench"  # seeded once, kept
DEPOSITS = 100_000
PER_TX = 100
SPAN = 50  # blocks per eth_getLogs / indexing step: ~10,000 events
DEVNET_CHAIN = 31337
COLUMNS = ["measure", "events", "seconds (best of 2)", "events/s", "vs ceiling"]


def run(ctx: Context, result: SectionResult) -> None:
    from devchain.devnet import deposit_many

    result.columns = COLUMNS
    ctx.log(f"indexing: deploying the devnet and making {DEPOSITS:,} deposits…")
    began = time.perf_counter()
    with ctx.devnet(BENCH_DB, fresh=False) as (rpc_url, manifest, db_url):
        # (The probe deletes the devnet's LAT when it ends; one left by an interrupted run
        # makes this reseed the database.)
        # Seeded in a process of its own: this one has Django set up on the bench database.
        seed = [PYTHON, "-m", "bench.dataset", db_url, str(ctx.args.deposits)]
        subprocess.run(seed, cwd=REPO, env=ctx.env, check=True)
        deposit_many(rpc_url, manifest, DEPOSITS, per_tx=PER_TX)
        ctx.log(f"indexing: chain and database ready in {time.perf_counter() - began:.0f} s")
        with tempfile.NamedTemporaryFile("w", suffix=".json") as manifest_file:
            json.dump(manifest, manifest_file)
            manifest_file.flush()
            cmd = [PYTHON, "-m", "bench.sections.indexing", rpc_url, manifest_file.name]
            env = {**ctx.env, "DATABASE_URL": db_url, "RPC_URL": rpc_url, "RPC_TIMEOUT": "300"}
            env["LOG_LEVEL"] = "WARNING"
            probe = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
    if probe.returncode != 0:
        result.failures.append(f"indexing probe failed: {probe.stderr[-2000:]}")
        return
    result.notes.append(
        f"The database held {ctx.args.deposits:,} deposits of chain {dataset.CHAIN_ID} from block "
        f"{dataset.FIRST_BLOCK:,} on; the devnet's LAT (chain {DEVNET_CHAIN}) starts below "
        "block 1,000, so each of its deposits sorts before every stored one."
    )
    _report(result, json.loads(probe.stdout.strip().splitlines()[-1]))


def _report(result: SectionResult, figures: dict) -> None:
    ceiling = min(figures["ceiling"], key=lambda r: r["seconds"])
    indexer = min(figures["indexer"], key=lambda r: r["seconds"])
    if indexer["events"] != ceiling["events"] or indexer["deposits"] < DEPOSITS:
        result.failures.append(
            f"indexer stored {indexer['events']} events and {indexer['deposits']} deposits; "
            f"the chain has {ceiling['events']} events"
        )
    ratio = (indexer["events"] / indexer["seconds"]) / (ceiling["events"] / ceiling["seconds"])
    for name, best, vs in (
        ("eth_getLogs, JSON parsed (ceiling)", ceiling, "1.00"),
        ("deposit_index (service)", indexer, f"{ratio:.2f}"),
    ):
        rate = f"{best['events'] / best['seconds']:,.0f}"
        result.rows.append([name, f"{best['events']:,}", f"{best['seconds']:.2f}", rate, vs])
    result.targets.append(
        Target(
            f"backfill at least {MIN_RATIO:.0%} of the eth_getLogs ceiling (events/s)",
            ratio >= MIN_RATIO,
            f"{ratio:.0%}",
        )
    )
    runs = {
        k: ", ".join(f"{r['seconds']:.2f}s" for r in figures[k]) for k in ("ceiling", "indexer")
    }
    result.notes.append(
        f"block range {SPAN}; runs: ceiling {runs['ceiling']}; indexer {runs['indexer']}; "
        f"the listing's counts after the backfill equal the rows: {figures['counts_ok']}"
    )


def probe(rpc: str, manifest_path: str) -> dict:
    """In the probe's process, Django on the indexing database: the ceiling and the service's
    indexer (the new LAT's rows deleted before each run) over the same LAT and block ranges,
    twice each."""
    import django

    django.setup()
    from activity.indexer import deposit_index
    from bench.activity_chain import logs_ceiling
    from chain.gateway import gateway_for_url
    from deposits.models import Deposit, DepositCount, Event
    from lats.manifests import lat_import_manifests, manifest_parse

    manifest = manifest_parse(json.loads(Path(manifest_path).read_text()), source=manifest_path)
    (lat,) = lat_import_manifests(manifests=[manifest])
    head = gateway_for_url(rpc, timeout=300).head().number
    contracts = {
        "LiquidToken": lat.proxy_address,
        "LiquidTokenManager": lat.proxy_of("liquidTokenManager"),
        "StakerNodeCoordinator": lat.proxy_of("stakerNodeCoordinator"),
    }
    results: dict = {"ceiling": [], "indexer": []}
    for _ in range(2):
        events, seconds = logs_ceiling(rpc, contracts, lat.deployment_block, head, span=SPAN)
        results["ceiling"].append({"events": events, "seconds": seconds})
    for _ in range(2):
        lat.delete()
        (lat,) = lat_import_manifests(manifests=[manifest])
        began = time.perf_counter()
        deposit_index(lat=lat, max_range=SPAN)
        seconds = time.perf_counter() - began
        stored = Event.objects.filter(lat=lat).count()
        deposits = Deposit.objects.filter(lat=lat).count()
        results["indexer"].append({"events": stored, "deposits": deposits, "seconds": seconds})
    counted = DepositCount.objects.filter(field="").values_list("n", flat=True)
    results["counts_ok"] = sum(counted) == Deposit.objects.count()
    lat.delete()  # the kept database holds the data set alone again
    return results


if __name__ == "__main__":  # the probe: python -m bench.sections.indexing RPC_URL MANIFEST
    print(json.dumps(probe(*sys.argv[1:3])))
