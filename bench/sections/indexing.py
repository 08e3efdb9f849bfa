"""Section `indexing`: a backfill. A new LAT's 100,000 historical deposits (200,000 events: each
`AssetDeposited` and its mint `Transfer`) indexed by `deposit_index` into a database that already
holds the data set's deposits of another chain at higher block numbers, beside plain
`eth_getLogs` of the same ranges (the JSON parsed, no database). The database
(`lat_indexing_bench`) is seeded once and kept; the probe deletes the devnet's LAT when it ends."""

from __future__ import annotations

import time

from bench import dataset, python
from bench.context import Context, SectionResult
from bench.sections.activity import index_rows, index_runs

TITLE = "Backfill of a new LAT beside 1,000,000 stored deposits, on anvil (events per second)"
MIN_RATIO = 0.50
DEPOSITS = 100_000
SPAN = 50  # blocks per eth_getLogs / indexing step: ~10,000 events


def run(ctx: Context, result: SectionResult) -> None:
    from devchain.devnet import deposit_many

    result.columns = ["measure", "events", "seconds (best of 2)", "events/s", "vs ceiling"]
    began = time.perf_counter()
    with ctx.devnet("indexing", fresh=False) as (rpc_url, manifest, db_url):
        # Seeded in a process of its own: this one may have Django set up on the bench database.
        python("-m", "bench.dataset", db_url, str(ctx.args.deposits), env=ctx.env)
        deposit_many(rpc_url, manifest, DEPOSITS, per_tx=100)
        ctx.log(f"indexing: chain and database ready in {time.perf_counter() - began:.0f} s")
        figures = ctx.probe("bench.activity_chain", rpc_url, manifest, db_url, str(SPAN))
    measures = {
        "ceiling": "eth_getLogs, JSON parsed (ceiling)",
        "indexer": "deposit_index (service)",
    }
    result.rows, rates = index_rows(result, figures, measures, 2 * DEPOSITS)
    if (deposits := min(r["deposits"] for r in figures["indexer"])) < DEPOSITS:
        result.failures.append(f"indexer stored {deposits} deposits; the chain has {DEPOSITS}")
    ratio = rates["indexer"] / rates["ceiling"]
    description = f"backfill at least {MIN_RATIO:.0%} of the eth_getLogs ceiling (events/s)"
    result.target(description, ratio, f"{ratio:.0%}", at_least=MIN_RATIO)
    result.notes.append(
        f"The database held {ctx.args.deposits:,} deposits of chain {dataset.CHAIN_ID} from block "
        f"{dataset.FIRST_BLOCK:,} on; the devnet's LAT (chain 31337) starts below block 1,000, "
        f"so each of its deposits sorts before every stored one.\nblock range {SPAN}; "
        f"{index_runs(figures, measures)}; the listing's counts after the backfill equal the rows: "
        f"{figures['check']['counts_ok']}"
    )
