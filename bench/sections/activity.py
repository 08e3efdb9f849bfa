"""Section `activity`: the holders and event-feed endpoints under load over 100,000 holders and
1,000,000 events (bulk-loaded, bench/activity_dataset.py) beside the constant-JSON baseline, and
the event indexer's rate over about 100,000 mixed events on anvil beside plain `eth_getLogs`
of the same ranges (bench/activity_chain.py)."""

from __future__ import annotations

import json
import statistics
import subprocess
import tempfile
import time

from bench import PYTHON, REPO, activity_chain, activity_dataset
from bench.context import Context, SectionResult, Target
from bench.load import LoadResult
from bench.sections.api import (
    COLUMNS,
    _ratio_target,
    _row,
    answer_json,
    interleave,
    interleaved_runs,
)

TITLE = "Holders and events endpoints under load; the event indexer on anvil"
DEEP_SKIP = 99_000
DEEP_SHARE = 0.99  # the deep cursor: this far into the feed, newest first
MIN_RATIO = 0.30
MAX_DEEP_P50_FACTOR = 2.0
MIN_INDEXER_RATIO = 0.50
CHAIN_EVENTS = 100_000
PAGES = {"holders": ("holders first page", "holders deep page")}
PAGES["events"] = ("events first page", "events deep page")
INDEX_COLUMNS = ["measure", "events", "blocks", "seconds (best of 2)", "events/s", "vs ceiling"]


def run(ctx: Context, result: SectionResult) -> None:
    result.columns = COLUMNS
    _http(ctx, result)
    _indexing(ctx, result)


# --- HTTP -----------------------------------------------------------------------------------


def _deep_cursor(ctx: Context, lat: str) -> tuple[str, int]:
    """A cursor DEEP_SHARE into the LAT's feed (the key of the record before the page), and
    how many feed events come before that page."""
    from activity.api.views import EVENT_CURSOR_VERSION
    from activity.selectors import FEED_TYPES
    from bench import dataset
    from core.api.cursors import cursor_encode

    with dataset.connect(ctx.db_url) as conn:
        (lat_id,) = conn.execute(
            "SELECT id FROM lats_lat WHERE proxy_address = %s", [lat]
        ).fetchone()
        where = "lat_id = %s AND type = ANY(%s)"
        (feed,) = conn.execute(
            f"SELECT count(*) FROM deposits_event WHERE {where}", [lat_id, list(FEED_TYPES)]
        ).fetchone()
        skip = int(feed * DEEP_SHARE)
        block, log_index = conn.execute(
            f"SELECT block_number, log_index FROM deposits_event WHERE {where}"
            " ORDER BY block_number DESC, log_index DESC OFFSET %s LIMIT 1",
            [lat_id, list(FEED_TYPES), skip - 1],
        ).fetchone()
    return cursor_encode(EVENT_CURSOR_VERSION, block, log_index), skip


def endpoints(ctx: Context, result: SectionResult) -> dict[str, str]:
    """Name: path of the baseline and the four pages; loads the data first if needed."""
    lat = ctx.dataset().primary_lat
    ctx.django()
    seconds = activity_dataset.prepare(ctx.db_url, lat, ctx.log)
    cursor, skipped = _deep_cursor(ctx, lat)
    loaded = "reused" if seconds is None else f"loaded this run in {seconds:.0f} s"
    result.notes.append(
        f"\nHTTP data: {activity_dataset.HOLDERS:,} holders (+{activity_dataset.FORMER:,} at a "
        f"zero balance) and {activity_dataset.EVENTS:,} events of {lat} ({loaded}); the deep "
        f"events page follows a cursor {skipped:,} feed events deep (of the feed's "
        f"{skipped / DEEP_SHARE:,.0f}; mints and burns are stored but not in the feed)."
    )
    return {
        "baseline": "/bench/baseline",
        "holders first page": f"/lat/{lat}/holders",
        "holders deep page": f"/lat/{lat}/holders?skip={DEEP_SKIP}",
        "events first page": f"/lat/{lat}/events",
        "events deep page": f"/lat/{lat}/events?cursor={cursor}",
    }


def smoke(name: str, status: int, body: bytes) -> str | None:
    """Why one answer is not what the data set should give, or None."""
    data, problem = answer_json(name, status, body)
    if data is None:
        return problem
    rows, meta = len(data.get("data") or []), data.get("meta") or {}
    if name.startswith("holders") and meta.get("total") != activity_dataset.HOLDERS:
        return f"{name}: meta.total is {meta.get('total')}, expected {activity_dataset.HOLDERS:,}"
    if not name.startswith("baseline") and rows != 12:
        return f"{name}: {rows} rows, expected 12"
    if name.startswith("events") and not meta.get("next"):
        return f"{name}: no meta.next"
    return None


def _http(ctx: Context, result: SectionResult) -> None:
    paths = endpoints(ctx, result)
    measured = _measure(ctx, result, paths)
    baselines = [measured[n] for n in ("baseline", "baseline (again)") if n in measured]
    baseline_rps = statistics.mean(b.rps for b in baselines) if baselines else 0.0
    paired = [(f"{n} (paired)", paths[n]) for pair in PAGES.values() for n in pair]
    for name, path in [*paths.items(), *paired, ("baseline (again)", paths["baseline"])]:
        result.rows.append(_row(name, path, measured.get(name), baseline_rps))
    usages = {name: load.cpu for name, load in measured.items()}
    result.warn_busy(usages, "req/s figures are disturbed (req/CPU-s less so)")
    if baselines:
        for name in list(paths)[1:]:
            together = interleaved_runs(measured, name)
            target = _ratio_target(name, measured.get(name), baselines, together)
            result.targets.append(target)
    for pair in PAGES.values():
        result.targets.append(_depth_target(measured, pair))


def _measure(ctx: Context, result: SectionResult, paths: dict[str, str]) -> dict[str, LoadResult]:
    """Each page alone (after a smoke request), each pair of pages together, the baseline
    again."""
    plan = [[(name, path)] for name, path in paths.items()]
    plan += [[(f"{n} (paired)", paths[n]) for n in pair] for pair in PAGES.values()]
    plan += [[("baseline (again)", paths["baseline"])]]
    measured: dict[str, LoadResult] = {}
    with ctx.server() as server:
        for runs in plan:
            started = time.monotonic()
            problems = [smoke(name, *server.get(path)) for name, path in runs]
            if problems := [p for p in problems if p]:
                result.failures.extend(problems)
                continue
            warmup = 0 if len(runs) > 1 else ctx.args.warmup
            loads = ctx.measure([server.url(p) for _, p in runs], warmup=warmup)
            for (label, path), load in zip(runs, loads, strict=True):
                measured[label] = load
                ctx.log(f"activity: {label}: {load.summary()} ({time.monotonic() - started:.0f} s)")
                result.check(f"{label} ({path})", load, server)
        # The ratio targets' decision: each page in turn with the baseline (api.interleave).
        for name, path in list(paths.items())[1:]:
            if name in measured:
                interleave(ctx, measured, name, server.url(paths["baseline"]), server.url(path))
    return measured


def _depth_target(measured: dict[str, LoadResult], pair: tuple[str, str]) -> Target:
    """The deep page's p50 over the first's, decided on the paired run (both pages on the same
    machine at the same moment), the separate runs' ratio beside it."""
    description = f"{pair[1]} p50 within {MAX_DEEP_P50_FACTOR:g}x of {pair[0]} p50"
    first, deep = (measured.get(n) for n in pair)
    pfirst, pdeep = (measured.get(f"{n} (paired)") for n in pair)
    if not (first and deep and pfirst and pdeep):
        return Target(description, False, "failed")
    alone = deep.p50_ms / first.p50_ms
    together = pdeep.p50_ms / pfirst.p50_ms
    detail = (
        f"{together:.2f}x run together ({pdeep.p50_ms:.2f} vs {pfirst.p50_ms:.2f} ms); "
        f"{alone:.2f}x run one after the other ({deep.p50_ms:.2f} vs {first.p50_ms:.2f} ms)"
    )
    return Target(description, together <= MAX_DEEP_P50_FACTOR, detail)


# --- the indexer on anvil -------------------------------------------------------------------


def _indexing(ctx: Context, result: SectionResult) -> None:
    """Generate the events on anvil, then time the ceiling and the indexer in the probe's own
    process (Django on the section's database)."""
    ctx.log(f"activity: deploying the devnet and emitting {CHAIN_EVENTS:,} events…")
    # lat_activity_bench beside the default lat_bench; recreated every run
    db_name = ctx.args.db_name.removesuffix("_bench") + "_activity_bench"
    with ctx.devnet(db_name) as (rpc_url, manifest, db_url):
        began = time.perf_counter()
        txs = activity_chain.generate(rpc_url, manifest, CHAIN_EVENTS)
        generation = time.perf_counter() - began
        ctx.log(f"activity: {txs} transactions in {generation:.0f} s; probing the indexer")
        with tempfile.NamedTemporaryFile("w", suffix=".json") as manifest_file:
            json.dump(manifest, manifest_file)
            manifest_file.flush()
            cmd = [PYTHON, "-m", "bench.activity_chain", rpc_url, manifest_file.name]
            env = {**ctx.env, "DATABASE_URL": db_url, "RPC_URL": rpc_url, "RPC_TIMEOUT": "300"}
            env["LOG_LEVEL"] = "WARNING"
            probe = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
    if probe.returncode != 0:
        result.failures.append(f"activity indexing probe failed: {probe.stderr[-2000:]}")
        return
    figures = json.loads(probe.stdout.strip().splitlines()[-1])
    result.notes.append(
        f"\nEvent generation on anvil (not timed below): {txs} transactions in "
        f"{generation:.1f} s, helper contract bench/contracts/ActivityBatch.sol included."
    )
    _index_report(result, figures)


def _index_report(result: SectionResult, figures: dict) -> None:
    best = {k: min(figures[k], key=lambda r: r["seconds"]) for k in ("ceiling", "decoded")}
    best["indexer"] = min(figures["indexer"], key=lambda r: r["seconds"])
    rate = {k: r["events"] / r["seconds"] for k, r in best.items()}
    ratio = rate["indexer"] / rate["ceiling"]
    rows = [INDEX_COLUMNS]
    for key, name in (
        ("ceiling", "eth_getLogs, JSON parsed (ceiling)"),
        ("decoded", "eth_getLogs + chain.activity decoder"),
        ("indexer", "deposit_index (service, fresh tables)"),
    ):
        r = best[key]
        vs = f"{rate[key] / rate['ceiling']:.2f}"
        rows.append([name, f"{r['events']:,}", str(figures["blocks"]), f"{r['seconds']:.2f}"])
        rows[-1] += [f"{rate[key]:,.0f}", vs]
    widths = [max(len(row[i]) for row in rows) for i in range(len(INDEX_COLUMNS))]
    lines = [
        "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        )
        for row in rows
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    runs = "; ".join(f"{k} " + ", ".join(f"{r['seconds']:.2f}s" for r in figures[k]) for k in best)
    result.notes += ["\nEvent indexing on anvil:", *lines, f"runs: {runs}"]
    _index_checks(result, figures, best)
    result.targets.append(
        Target(
            f"indexer at least {MIN_INDEXER_RATIO:.0%} of the eth_getLogs ceiling (events/s)",
            ratio >= MIN_INDEXER_RATIO,
            f"{ratio:.0%} ({rate['indexer']:,.0f} vs {rate['ceiling']:,.0f} events/s)",
        )
    )


def _index_checks(result: SectionResult, figures: dict, best: dict) -> None:
    """The indexer stored every log read, and the holders it kept match the chain."""
    check = figures["check"]
    types = ", ".join(f"{k} {v:,}" for k, v in sorted(check["types"].items()))
    result.notes.append(
        f"events stored by type: {types}; holders {check['holders']:,} (tally "
        f"{check['tally']:,}); balances sum {check['balances']} = totalSupply {check['supply']}"
        f": {'yes' if check['balances'] == check['supply'] else 'NO'}"
    )
    logs = best["ceiling"]["events"]
    if any(r["events"] != logs for r in figures["indexer"]) or logs < CHAIN_EVENTS:
        stored = [r["events"] for r in figures["indexer"]]
        result.failures.append(f"indexer stored {stored} events; eth_getLogs read {logs}")
    if check["balances"] != check["supply"] or check["holders"] != check["tally"]:
        result.failures.append(f"holders do not match the chain: {check}")
