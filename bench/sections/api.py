"""Section `api`: the read endpoints beside `GET /bench/baseline` (the stack's own cost), each at
least 30% of its req/s, the cached LAT list and detail 90% (60% uncached), and deep pages' p50
within 2x of the first page's."""

from __future__ import annotations

import statistics

from bench import dataset
from bench.context import Context, SectionResult
from bench.load import children_of

TITLE = "HTTP read endpoints under load (gunicorn, bench database)"
MIN_RATIO, MIN_UNCACHED_RATIO, MAX_DEEP_P50_FACTOR = 0.30, 0.60, 2.0
MIN_CACHED_RATIO = 0.90  # the LAT list and detail, answered from the document cache
UNCACHED = {"lat list (uncached)": "lat list", "lat detail (uncached)": "lat detail"}
PAIRS = (
    ("deposits first page", "deposits deep page"),
    ("deposits first page", "deposits cursor deep page"),
    ("sender first page", "sender page 900"),
)
ROUNDS, ROUND_SECONDS = 6, 2.0  # of the interleaved runs that decide the ratio targets
COLUMNS = ["endpoint", "req/s", "p50 ms", "p90 ms", "p99 ms", "vs baseline", "requests"]
COLUMNS += ["errors", "CPU srv/db/gen/other", "req/CPU-s"]


def endpoints(ctx: Context) -> dict[str, str]:
    ctx.django()
    from deposits.api.views import cursor_encode
    from deposits.selectors import DepositKey

    def cursor(position: int, sender: str = "") -> str:  # a client's after `position` records
        sql = "SELECT block_number, log_index, chain_id FROM deposits_deposit"
        sql += " WHERE sender = %(s)s" if sender else ""
        sql += " ORDER BY block_number DESC, log_index DESC, chain_id DESC OFFSET %(n)s LIMIT 1"
        with dataset.connect(ctx.db_url) as conn:
            key = conn.execute(sql, {"s": sender, "n": position - 1}).fetchone()
        return cursor_encode(DepositKey(*key))

    lat, sender = dataset.MARKERS[0], dataset.address("user:0")
    deep = min(900_000, ctx.args.deposits - 12)
    by_sender = f"/metrics/deposits?sender={sender}&take=100"  # a tenth of the deposits
    return {
        "baseline": "/bench/baseline",
        "lat list": "/lat",
        "lat detail": f"/lat/{lat}?withTvl=true&withCuratedMetadata=true&withRewards=true",
        "deposits first page": "/metrics/deposits",
        "deposits deep page": f"/metrics/deposits?skip={deep}",
        "deposits cursor deep page": f"/metrics/deposits?cursor={cursor(deep)}",
        "sender first page": by_sender,
        "sender page 900": f"{by_sender}&cursor={cursor(899 * 100, sender)}",
    }


def run(ctx: Context, result: SectionResult) -> None:
    paths = endpoints(ctx)
    with ctx.server() as cached, ctx.server(DOCUMENT_CACHE_SECONDS="0") as uncached:
        plan = {}
        for name, path in paths.items():  # each uncached row after the cached one
            plan[name] = (cached, path)
            plan |= {row: (uncached, path) for row, of in UNCACHED.items() if of == name}
        measured = pages(ctx, result, plan, PAIRS)
    result.notes.append(
        "\nvs baseline: over the mean of the two baseline runs. (uncached): a second server with "
        f"DOCUMENT_CACHE_SECONDS=0. (pair N): {max(1, ctx.args.connections // 2)} connections "
        "each, the CPU column the pair's. bench/README.md reads the figures."
    )
    minimum = {name: MIN_UNCACHED_RATIO for name in UNCACHED}
    minimum |= {name: MIN_CACHED_RATIO for name in UNCACHED.values()}
    report(result, plan, PAIRS, measured, lambda name: minimum.get(name, MIN_RATIO))


def pages(ctx: Context, result: SectionResult, plan: dict, pairs) -> dict:
    """Each endpoint of `plan` ({name: (server, path)}, baseline first) alone, each pair of pages
    together, the baseline again; then each endpoint interleaved with the baseline."""
    runs = [[(name, name)] for name in plan]
    runs += [[(f"{n} (pair {k + 1})", n) for n in pair] for k, pair in enumerate(pairs)]
    measured = {}
    for run in [*runs, [("baseline (again)", "baseline")]]:
        server = plan[run[0][1]][0]
        urls, warmup = [server.url(plan[n][1]) for _, n in run], ctx.args.warmup * (len(run) == 1)
        loads = ctx.measure(urls, warmup=warmup, pids={"server": children_of(server.process.pid)})
        for (label, n), load in zip(run, loads, strict=True):
            measured[label] = load
            ctx.log(f"{result.name}: {label}: {load.rps:,.0f} req/s, p50 {load.p50_ms:.2f} ms")
            result.check(f"{label} ({plan[n][1]})", load, server)
    base = plan["baseline"][0].url(plan["baseline"][1])
    for name, (server, path) in list(plan.items())[1:]:
        sides = [(base, None), (server.url(path), None)]
        theirs, mine = ctx.interleave(sides, rounds=ROUNDS, duration=ROUND_SECONDS)
        measured[f"{name} (interleaved)"], measured[f"{name} (its baseline)"] = mine, theirs
        result.check(f"{name} interleaved with the baseline", mine, server)
    return measured


def report(result: SectionResult, plan: dict, pairs, measured: dict, minimum) -> None:
    result.columns, baselines = COLUMNS, [measured["baseline"], measured["baseline (again)"]]
    base_rps = statistics.mean(b.rps for b in baselines)
    labels = [*plan, *(f"{n} (pair {k + 1})" for k, pair in enumerate(pairs) for n in pair)]
    for label in [*labels, "baseline (again)"]:
        path = plan[label.split(" (pair")[0].removesuffix(" (again)")][1]
        result.rows.append(_row(label, path, measured[label], base_rps))
    drift = abs(baselines[0].rps - baselines[1].rps) / max(b.rps for b in baselines)
    if drift > 0.10:
        result.notes.append(
            f"WARNING: the two baseline runs differ by {drift:.0%}: the machine's capacity "
            "changed during the run; compare figures with care."
        )
    result.warn_busy({k: v.cpu for k, v in measured.items()}, "req/s figures are disturbed")
    per_cpu = statistics.mean(b.requests / b.cpu.ours for b in baselines)
    for name in list(plan)[1:]:
        load, mine, theirs = (measured[name + s] for s in ("", " (interleaved)", " (its baseline)"))
        detail = f"{mine.rps / theirs.rps:.1%} interleaved ({mine.rps:,.0f} vs {theirs.rps:,.0f} "
        detail += f"req/s, {ROUNDS} rounds of {ROUND_SECONDS:g} s); {load.rps / base_rps:.1%} run "
        detail += f"apart ({load.rps:,.0f} vs {base_rps:,.0f} req/s); per CPU-second "
        detail += f"{load.requests / load.cpu.ours / per_cpu:.1%}"
        description = f"{name} >= {minimum(name):.0%} of baseline req/s"
        result.target(description, mine.rps / theirs.rps, detail, at_least=minimum(name))
    for k, pair in enumerate(pairs):
        first, deep, pfirst, pdeep = (
            measured[n + s] for s in ("", f" (pair {k + 1})") for n in pair
        )
        detail = f"{pdeep.p50_ms / pfirst.p50_ms:.2f}x run together ({pdeep.p50_ms:.2f} vs "
        detail += f"{pfirst.p50_ms:.2f} ms); {deep.p50_ms / first.p50_ms:.2f}x run one after the "
        detail += f"other ({deep.p50_ms:.2f} vs {first.p50_ms:.2f} ms)"
        description = f"{pair[1]} p50 within {MAX_DEEP_P50_FACTOR:g}x of {pair[0]} p50"
        together = pdeep.p50_ms / pfirst.p50_ms
        result.target(description, together, detail, at_most=MAX_DEEP_P50_FACTOR)


def _row(name: str, path: str, load, base_rps: float) -> list[str]:
    alone, cpu = "(pair" not in name, load.cpu  # paired rows share the server and the CPU
    split = [*map(cpu.cores, ("server", "db", "loadgen")), cpu.other_cores]
    return [
        f"{name}  GET {path if len(path) < 40 else path[:37] + '...'}",
        f"{load.rps:,.0f}",
        *(f"{ms:,.2f}" for ms in (load.p50_ms, load.p90_ms, load.p99_ms)),
        f"{load.rps / base_rps:.0%}" if alone else "-",
        f"{load.requests:,}",
        str(load.errors),
        "/".join(f"{x:.2f}" for x in split),
        f"{load.requests / cpu.ours:,.0f}" if alone else "-",
    ]
