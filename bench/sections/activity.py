"""Section `activity`: the holders and event-feed endpoints under load over 100,000 holders and
1,000,000 events (bench/dataset.py) beside the baseline, as `api` measures its endpoints; and
the event indexer's rate over about 100,000 mixed events on anvil (bench/activity_chain.py),
with plain `eth_getLogs` of the same ranges for reference."""

from __future__ import annotations

import time

from bench import activity_chain, dataset
from bench.context import Context, SectionResult, table
from bench.sections.api import answer, pages, report

TITLE = "Holders and events endpoints under load; the event indexer on anvil"
DEEP_SHARE = 0.99  # the deep cursor: this far into the feed, newest first
CHAIN_EVENTS = 100_000
PAIRS = (("holders first page", "holders deep page"), ("events first page", "events deep page"))
INDEX_COLUMNS = ["measure", "events", "blocks", "seconds (best of 2)", "events/s", "vs getLogs"]


def run(ctx: Context, result: SectionResult) -> None:
    paths = endpoints(ctx, result)
    with ctx.server() as server:
        plan = {name: (server, path) for name, path in paths.items()}
        measured = pages(ctx, result, plan, PAIRS, lambda name, s, path: smoke(name, *s.get(path)))
    report(result, plan, PAIRS, measured, lambda name: 0.30)
    ctx.log(f"activity: deploying the devnet and emitting {CHAIN_EVENTS:,} events…")
    with ctx.devnet("activity") as (rpc_url, manifest, db_url):
        began = time.perf_counter()
        txs = activity_chain.generate(rpc_url, manifest, CHAIN_EVENTS)
        generation = time.perf_counter() - began
        span = str(activity_chain.SPAN)
        figures = ctx.probe("bench.activity_chain", rpc_url, manifest, db_url, span, "decoded")
    result.notes.append(
        f"\nEvent generation on anvil (not timed below): {txs} transactions in "
        f"{generation:.1f} s, helper contract bench/contracts/ActivityBatch.sol included."
    )
    measures = {"ceiling": "eth_getLogs, JSON parsed"}
    measures |= {"decoded": "eth_getLogs + chain.activity decoder"}
    measures |= {"indexer": "deposit_index (service, fresh tables)"}
    rows, rates = index_rows(result, figures, measures, CHAIN_EVENTS, blocks=True)
    result.notes += [
        "\nEvent indexing on anvil:",
        *table(INDEX_COLUMNS, rows),
        index_runs(figures, measures),
    ]
    check, same = figures["check"], figures["check"]["balances"] == figures["check"]["supply"]
    types = ", ".join(f"{k} {v:,}" for k, v in sorted(check["types"].items()))
    result.notes.append(
        f"events stored by type: {types}; holders {check['holders']:,} (tally "
        f"{check['tally']:,}); balances sum {check['balances']} = totalSupply {check['supply']}"
        f": {'yes' if same else 'NO'}; the indexer runs at "
        f"{rates['indexer'] / rates['ceiling']:.0%} of eth_getLogs alone (information, no target)"
    )
    if not same or check["holders"] != check["tally"]:
        result.failures.append(f"holders do not match the chain: {check}")


def endpoints(ctx: Context, result: SectionResult) -> dict[str, str]:
    """Name: path of the baseline and the four pages; loads the data first if needed."""
    lat = ctx.dataset().primary_lat
    ctx.django()
    from activity.api.views import EVENT_CURSOR_VERSION
    from activity.selectors import FEED_TYPES
    from core.api.cursors import cursor_encode

    seconds = dataset.prepare_activity(ctx.db_url, lat, ctx.log)
    feed = "FROM deposits_event e JOIN lats_lat l ON l.id = e.lat_id"
    feed += " WHERE l.proxy_address = %s AND e.type = ANY(%s)"
    with dataset.connect(ctx.db_url) as conn:  # the cursor DEEP_SHARE into the LAT's feed
        (count,) = conn.execute(f"SELECT count(*) {feed}", [lat, list(FEED_TYPES)]).fetchone()
        skip = int(count * DEEP_SHARE)
        block, log_index = conn.execute(
            f"SELECT block_number, log_index {feed}"
            " ORDER BY block_number DESC, log_index DESC OFFSET %s LIMIT 1",
            [lat, list(FEED_TYPES), skip - 1],
        ).fetchone()
    loaded = "reused" if seconds is None else f"loaded this run in {seconds:.0f} s"
    result.notes.append(
        f"\nHTTP data: {dataset.HOLDERS:,} holders (+{dataset.FORMER:,} at a zero balance) and "
        f"{dataset.EVENTS:,} events of {lat} ({loaded}); the deep events page follows a cursor "
        f"{skip:,} feed events deep (of the feed's {count:,}; mints and burns are stored but "
        "not in the feed)."
    )
    return {
        "baseline": "/bench/baseline",
        "holders first page": f"/lat/{lat}/holders",
        "holders deep page": f"/lat/{lat}/holders?skip=99000",
        "events first page": f"/lat/{lat}/events",
        "events deep page": f"/lat/{lat}/events?cursor="
        + cursor_encode(EVENT_CURSOR_VERSION, block, log_index),
    }


def smoke(name: str, status: int, body: bytes) -> str | None:
    """Why one answer is not what the data set should give, or None."""
    data, problem = answer(name, status, body)
    rows, meta = len(data.get("data") or []), data.get("meta") or {}
    if name.startswith("holders") and meta.get("total") != dataset.HOLDERS:
        problem = problem or f"{name}: meta.total is {meta.get('total')}, not {dataset.HOLDERS:,}"
    if not name.startswith("baseline") and rows != 12:
        problem = problem or f"{name}: {rows} rows, expected 12"
    if name.startswith("events") and not meta.get("next"):
        problem = problem or f"{name}: no meta.next"
    return problem


def index_rows(result, figures: dict, measures: dict, at_least: int, blocks=False):
    """A row per measure of the probe's figures (its best run): name, events, (blocks), seconds,
    events/s and the rate over eth_getLogs'; a failure unless every indexer run stored as many
    events as eth_getLogs read (and at least `at_least`). The rows and the rates."""
    best = {k: min(figures[k], key=lambda r: r["seconds"]) for k in measures}
    rates = {k: r["events"] / r["seconds"] for k, r in best.items()}
    rows = []
    for k, name in measures.items():
        rows.append([name, f"{best[k]['events']:,}", *([str(figures["blocks"])] if blocks else [])])
        rows[-1] += [f"{best[k]['seconds']:.2f}", f"{rates[k]:,.0f}"]
        rows[-1].append(f"{rates[k] / rates['ceiling']:.2f}")
    stored, logs = [r["events"] for r in figures["indexer"]], best["ceiling"]["events"]
    if any(n != logs for n in stored) or logs < at_least:
        result.failures.append(f"indexer stored {stored} events; eth_getLogs read {logs}")
    return rows, rates


def index_runs(figures: dict, measures) -> str:
    runs = (f"{k} " + ", ".join(f"{r['seconds']:.2f}s" for r in figures[k]) for k in measures)
    return "runs: " + "; ".join(runs)
