"""Section `indexing`: a backfill of a new LAT's 100,000 deposits (200,000 events) on anvil into a
database holding 1,000,000 later deposits, at least 50% of `eth_getLogs` of the same ranges."""

from __future__ import annotations

import time

from bench import dataset
from bench.context import Context, SectionResult
from bench.sections.activity import index_rows

TITLE = "Backfill of a new LAT beside 1,000,000 stored deposits, on anvil (events per second)"
MIN_RATIO = 0.50
DEPOSITS = 100_000
SPAN = 50  # blocks per eth_getLogs / indexing step: ~10,000 events


def run(ctx: Context, result: SectionResult) -> None:
    from devchain.devnet import deposit_many

    result.columns = ["measure", "events", "seconds (best of 2)", "events/s", "vs ceiling"]
    began = time.perf_counter()
    with ctx.devnet("indexing", fresh=False) as (rpc_url, manifest, db_url):
        dataset.prepare(db_url, ctx.env, ctx.args.deposits, ctx.log)  # kept from run to run
        deposit_many(rpc_url, manifest, DEPOSITS, per_tx=100)
        ctx.log(f"indexing: chain and database ready in {time.perf_counter() - began:.0f} s")
        args = (rpc_url, manifest, db_url, str(SPAN), "2", "ceiling")
        figures = ctx.probe("bench.sections.activity", *args)
    measures = {"ceiling": "eth_getLogs, JSON parsed (ceiling)"}
    measures["indexer"] = "deposit_index (service)"
    result.rows, rates, runs = index_rows(result, figures, measures, 2 * DEPOSITS)
    if (deposits := min(r["deposits"] for r in figures["indexer"])) < DEPOSITS:
        result.failures.append(f"indexer stored {deposits} deposits; the chain has {DEPOSITS}")
    ratio = rates["indexer"] / rates["ceiling"]
    description = f"backfill at least {MIN_RATIO:.0%} of the eth_getLogs ceiling (events/s)"
    result.target(description, ratio, f"{ratio:.0%}", at_least=MIN_RATIO)
    result.notes.append(
        f"The database held {ctx.args.deposits:,} deposits of chain 1 from block 20,000,000 on; "
        "the devnet's LAT (chain 31337) starts below block 1,000, so each of its deposits sorts "
        f"before every stored one.\nblock range {SPAN}; {runs}; the listing's counts after the "
        f"backfill equal the rows: {figures['check']['counts_ok']}"
    )
