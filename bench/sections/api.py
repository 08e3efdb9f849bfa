"""Section `api`: the read endpoints under closed-loop load, beside `GET /bench/baseline` (constant
JSON through the same stack, no database): the ratio is what the endpoint's own work costs.

The LAT list and detail are measured twice: on the server of the bench's environment (the
read-document cache in steady state) and on a second server, running at the same time, with
DOCUMENT_CACHE_SECONDS=0 (every request builds its document: the miss path, which a live
service takes after every indexed change)."""

from __future__ import annotations

import json
import statistics
import time

from bench import dataset
from bench.context import Context, SectionResult, Server
from bench.load import LoadResult, children_of

TITLE = "HTTP read endpoints under load (gunicorn, bench database)"
DEEP_SKIP = 900_000
MIN_RATIO = 0.30  # each API endpoint: at least 30% of the baseline's throughput
MIN_UNCACHED_RATIO = 0.50  # the LAT list and detail with the document cache off (issue 9)
# Rows measured on the server without the document cache: name -> the endpoint it loads.
UNCACHED = {"lat list (uncached)": "lat list", "lat detail (uncached)": "lat detail"}
MAX_DEEP_P50_FACTOR = 2.0  # the deep page's p50 within 2x the first page's
# (first page, deep page): loaded together for the depth targets.
PAIRS = (
    ("deposits first page", "deposits deep page"),
    ("deposits first page", "deposits cursor deep page"),
    ("sender first page", "sender page 900"),
)
# The ratio targets are decided on interleaved runs: ROUNDS rounds of the baseline and the
# endpoint one after the other (the order alternating), ROUND_SECONDS each, their requests and
# seconds summed. The machine's capacity drifts by tens of percent within a minute here (the two
# baseline runs of one bench have differed by 30%); runs far apart in time compare that drift.
ROUNDS = 6
ROUND_SECONDS = 2.0
SENDER_TAKE = 100
SENDER_PAGE = 900
COLUMNS = ["endpoint", "req/s", "p50 ms", "p90 ms", "p99 ms", "vs baseline", "requests"]
COLUMNS += ["errors", "CPU srv/db/gen/other", "req/CPU-s"]


def endpoints(ctx: Context) -> dict[str, str]:
    """Name: path of the baseline and the read endpoints."""
    lat = ctx.dataset().primary_lat
    sender = dataset.address("user:0")  # a tenth of the deposits (dataset.WHALE_SHARE)
    by_sender = f"/metrics/deposits?sender={sender}&take={SENDER_TAKE}"
    sender_deep = (SENDER_PAGE - 1) * SENDER_TAKE
    return {
        "baseline": "/bench/baseline",
        "lat list": "/lat",
        "lat detail": f"/lat/{lat}?withTvl=true&withCuratedMetadata=true&withRewards=true",
        "deposits first page": "/metrics/deposits",
        "deposits deep page": f"/metrics/deposits?skip={_deep_skip(ctx)}",
        "deposits cursor deep page": f"/metrics/deposits?cursor={_cursor(ctx, _deep_skip(ctx))}",
        "sender first page": by_sender,
        "sender page 900": f"{by_sender}&cursor={_cursor(ctx, sender_deep, sender=sender)}",
    }


def _cursor(ctx: Context, position: int, *, sender: str | None = None) -> str:
    """The cursor a client following the listing holds after `position` records: the key of
    the record before them, read from the database (newest first)."""
    ctx.django()  # the service's cursor encoding comes with its views
    from deposits.api.views import cursor_encode
    from deposits.selectors import DepositKey

    where, params = ("WHERE sender = %s", [sender]) if sender else ("", [])
    with dataset.connect(ctx.db_url) as conn:
        key = conn.execute(
            f"SELECT block_number, log_index, chain_id FROM deposits_deposit {where}"
            " ORDER BY block_number DESC, log_index DESC, chain_id DESC OFFSET %s LIMIT 1",
            [*params, position - 1],
        ).fetchone()
    return cursor_encode(DepositKey(*key))


def _deep_skip(ctx: Context) -> int:
    return min(DEEP_SKIP, max(0, ctx.args.deposits - 12))


def answer_json(name: str, status: int, body: bytes) -> tuple[dict | None, str | None]:
    """A 200's JSON object, or why the answer is not one."""
    if status != 200:
        return None, f"{name}: HTTP {status}: {body[:300]!r}"
    try:
        return json.loads(body), None
    except ValueError:
        return None, f"{name}: not JSON: {body[:300]!r}"


def smoke(ctx: Context, name: str, status: int, body: bytes) -> str | None:
    """Why one answer is not what the endpoint should give for the data set, or None."""
    data, problem = answer_json(name, status, body)
    if data is None:
        return problem
    rows, expect = len(data.get("data") or []), ctx.dataset()
    if name.startswith("baseline") and "data" not in data:
        return f"{name}: unexpected body {body[:200]!r}"
    if name.startswith("deposits") and data.get("meta", {}).get("total") != expect.deposits:
        return f"{name}: meta.total is {data.get('meta')}, expected {expect.deposits:,}"
    if name.startswith("deposits") and rows != 12:
        return f"{name}: {rows} rows, expected 12"
    whale = int(expect.deposits * dataset.WHALE_SHARE)
    total = data.get("meta", {}).get("total") or 0
    if name.startswith("sender") and not (0.9 * whale < total < 1.1 * whale and rows == 100):
        return f"{name}: {rows} rows of meta.total {total}, expected 100 of about {whale:,}"
    if name == "lat list" and rows != len(expect.lats):
        return f"{name}: {rows} LATs, expected {len(expect.lats)}"
    if name == "lat detail" and "tvl" not in data:
        return f"{name}: no tvl in {body[:200]!r}"
    return None


def run(ctx: Context, result: SectionResult) -> None:
    paths = endpoints(ctx)
    rows = {}  # each uncached row after the cached one of its endpoint
    for name, path in paths.items():
        rows[name] = path
        rows.update((row, path) for row, of in UNCACHED.items() if of == name)
    with ctx.server() as cached, ctx.server(DOCUMENT_CACHE_SECONDS="0") as uncached:

        def check(name: str, server: Server, path: str) -> str | None:
            """The smoke check; an uncached answer must also be the cached one, byte for byte."""
            status, body = server.get(path)
            if (
                problem := smoke(ctx, UNCACHED.get(name, name), status, body)
            ) or name not in UNCACHED:
                return problem
            if (other := cached.get(path)) != (status, body):
                return (
                    f"{name}: the uncached answer differs from the cached one: {other[1][:200]!r}"
                )
            return None

        plan = {
            name: (uncached if name in UNCACHED else cached, path) for name, path in rows.items()
        }
        measured = pages(ctx, result, plan, PAIRS, check)
        if ctx.args.explain:
            result.notes.extend(_explain(ctx))
    result.notes.append(
        "\nvs baseline: req/s over the mean of the two baseline runs. CPU: cores used by the "
        "gunicorn workers / the PostgreSQL backends / the load generator / everything else on "
        "the machine. req/CPU-s: requests per CPU-second of the bench's processes (steadier "
        "than req/s on a shared machine). (uncached): the same endpoint on a second server with "
        "DOCUMENT_CACHE_SECONDS=0, every document built from the database (the miss path). "
        "Ratio targets are decided on interleaved runs: the endpoint and the baseline loaded in "
        f"turn, {ROUNDS} rounds of {ROUND_SECONDS:g} s each, so that both see the same drift of "
        "the machine's capacity (a shared machine's drifts by tens of percent within a minute); "
        "the ratio of runs far apart in time is printed beside. "
        "(pair N): a first and a deep page loaded at the same "
        f"time, {max(1, ctx.args.connections // 2)} connections each, for comparing their "
        "latencies under identical conditions; the CPU column is the pair's. Cursor pages "
        "follow a cursor a client holds after that many records (read from the database)."
    )
    minimum = {name: MIN_UNCACHED_RATIO for name in UNCACHED}
    report(result, rows, PAIRS, measured, lambda name: minimum.get(name, MIN_RATIO))


# --- what `activity` shares: pages measured, interleaved with the baseline, and judged -------


def _paired(k: int, name: str) -> str:
    return f"{name} (pair {k + 1})"


def pages(ctx: Context, result: SectionResult, plan: dict, pairs, smoke) -> dict[str, LoadResult]:
    """Each endpoint of `plan` ({name: (server, path)}, "baseline" first) alone after its smoke
    check (`smoke(name, server, path)`: why the answer is wrong, or None), each pair of first
    and deep pages together (half the connections each: both see the same machine at the same
    moment), the baseline again; then each endpoint interleaved with the baseline for the
    ratio targets (ROUNDS rounds of ROUND_SECONDS s, the order alternating)."""
    runs = [[(name, name)] for name in plan]
    runs += [[(_paired(k, n), n) for n in pair] for k, pair in enumerate(pairs)]
    measured: dict[str, LoadResult] = {}
    for run in [*runs, [("baseline (again)", "baseline")]]:
        server, started = plan[run[0][1]][0], time.monotonic()
        if len(run) == 1 and (problem := smoke(run[0][1], *plan[run[0][1]])):
            result.failures.append(problem)
            ctx.log(f"{result.name}: {problem}")
            continue
        if not all(n in measured for _, n in run[1:] or ()):
            continue
        urls = [server.url(plan[n][1]) for _, n in run]
        warmup = ctx.args.warmup if len(run) == 1 else 0.0
        pids = {"server": children_of(server.process.pid)}  # whichever server started last
        for (label, n), load in zip(run, ctx.measure(urls, warmup=warmup, pids=pids), strict=True):
            measured[label] = load
            ctx.log(
                f"{result.name}: {label}: {load.summary()} ({time.monotonic() - started:.0f} s)"
            )
            result.check(f"{label} ({plan[n][1]})", load, server)
    base, base_path = plan["baseline"]
    for name, (server, path) in list(plan.items())[1:]:
        if name in measured:
            sides = [(base.url(base_path), None), (server.url(path), None)]
            theirs, mine = ctx.interleave(sides, rounds=ROUNDS, duration=ROUND_SECONDS)
            measured[f"{name} (interleaved)"] = mine
            measured[f"baseline (interleaved with {name})"] = theirs
            result.check(f"{name} interleaved with the baseline", mine, server)
            ctx.log(
                f"{result.name}: {name} interleaved: {mine.rps / theirs.rps:.1%} of the baseline"
            )
    return measured


def report(result: SectionResult, paths: dict[str, str], pairs, measured, minimum) -> None:
    """The rows, the warnings, the ratio targets (at least `minimum(name)` of the baseline's
    req/s) and the depth targets (the deep page's p50 within MAX_DEEP_P50_FACTOR of the
    first's)."""
    result.columns = COLUMNS
    baselines = [measured[n] for n in ("baseline", "baseline (again)") if n in measured]
    baseline_rps = statistics.mean(b.rps for b in baselines) if baselines else 0.0
    paired = [(_paired(k, n), paths[n]) for k, pair in enumerate(pairs) for n in pair]
    for name, path in [*paths.items(), *paired, ("baseline (again)", paths["baseline"])]:
        result.rows.append(_row(name, path, measured.get(name), baseline_rps))
    if len(baselines) == 2:
        drift = abs(baselines[0].rps - baselines[1].rps) / max(b.rps for b in baselines)
        if drift > 0.10:
            result.notes.append(
                f"WARNING: the two baseline runs differ by {drift:.0%}: the machine's capacity "
                "changed during the run; compare figures with care."
            )
    usages = {name: load.cpu for name, load in measured.items()}
    result.warn_busy(usages, "req/s figures are disturbed (req/CPU-s less so)")
    for name in list(paths)[1:] if baseline_rps else ():
        _ratio_target(result, name, measured, baselines, minimum(name))
    for k, pair in enumerate(pairs):
        first, deep = (measured.get(n) for n in pair)
        pfirst, pdeep = (measured.get(_paired(k, n)) for n in pair)
        description = f"{pair[1]} p50 within {MAX_DEEP_P50_FACTOR:g}x of {pair[0]} p50"
        if not (first and deep and pfirst and pdeep):
            result.target(description, 0, "failed", also=False)
            continue
        detail = (
            f"{pdeep.p50_ms / pfirst.p50_ms:.2f}x run together ({pdeep.p50_ms:.2f} vs "
            f"{pfirst.p50_ms:.2f} ms); {deep.p50_ms / first.p50_ms:.2f}x run one after the other "
            f"({deep.p50_ms:.2f} vs {first.p50_ms:.2f} ms)"
        )
        result.target(
            description, pdeep.p50_ms / pfirst.p50_ms, detail, at_most=MAX_DEEP_P50_FACTOR
        )


def _row(name: str, path: str, load: LoadResult | None, baseline_rps: float) -> list[str]:
    if load is None:
        return [name, "-", "-", "-", "-", "-", "-", "failed", "-", "-"]
    alone = "(pair" not in name  # paired rows share the server and the CPU
    ratio = load.rps / baseline_rps if baseline_rps else float("nan")
    cpu = load.cpu
    return [
        f"{name}  GET {path if len(path) < 40 else path[:37] + '...'}",
        f"{load.rps:,.0f}",
        *(f"{ms:,.2f}" for ms in (load.p50_ms, load.p90_ms, load.p99_ms)),
        f"{ratio:.0%}" if alone else "-",
        f"{load.requests:,}" + (" (cap)" if load.capped else ""),
        str(load.errors),
        "/".join(f"{cpu.cores(g):.2f}" for g in ("server", "db", "loadgen"))
        + f"/{cpu.other_cores:.2f}",
        f"{load.requests / cpu.ours:,.0f}" if alone and cpu.ours else "-",
    ]


def _ratio_target(result, name: str, measured: dict, baselines: list, minimum: float) -> None:
    """Decided on the interleaved runs; the endpoint's own run over the mean of the two baseline
    runs, and the same per CPU-second, beside them."""
    description = f"{name} >= {minimum:.0%} of baseline req/s"
    load = measured.get(name)
    mine, theirs = (
        measured.get(f"{name} (interleaved)"),
        measured.get(f"baseline (interleaved with {name})"),
    )
    if load is None or not (mine and theirs and theirs.rps):
        result.target(description, 0, "failed", also=False)
        return
    baseline_rps = statistics.mean(b.rps for b in baselines)
    detail = (
        f"{mine.rps / theirs.rps:.1%} interleaved ({mine.rps:,.0f} vs {theirs.rps:,.0f} req/s, "
        f"{ROUNDS} rounds of {ROUND_SECONDS:g} s); {load.rps / baseline_rps:.1%} run apart "
        f"({load.rps:,.0f} vs {baseline_rps:,.0f} req/s)"
    )
    per_cpu = [b.requests / b.cpu.ours for b in baselines if b.cpu.ours]
    if per_cpu and load.cpu.ours:  # requests per bench CPU-second, over the baseline's
        detail += f"; per CPU-second {load.requests / load.cpu.ours / statistics.mean(per_cpu):.1%}"
    result.target(description, mine.rps / theirs.rps, detail, at_least=minimum)


def _explain(ctx: Context) -> list[str]:
    """In-process: the deposit listing's queries, their plans and the selector's own time."""
    ctx.django()
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from deposits.selectors import deposit_page

    notes = ["", "Deposit listing, in process (--explain):"]
    for skip in (0, _deep_skip(ctx)):
        timings = []
        for _ in range(30):
            started = time.perf_counter()
            deposit_page(skip=skip, take=12, filters={})
            timings.append((time.perf_counter() - started) * 1000)
        with CaptureQueriesContext(connection) as captured:
            deposit_page(skip=skip, take=12, filters={})
        notes.append(
            f"  skip={skip}: {len(captured.captured_queries)} queries, selector median "
            f"{statistics.median(timings):.2f} ms"
        )
        with connection.cursor() as cursor:
            for query in captured.captured_queries:
                cursor.execute("EXPLAIN (ANALYZE, BUFFERS) " + query["sql"])
                plan = "\n".join("      " + row[0] for row in cursor.fetchall())
                notes.append(f"    {query['sql'][:160]}...\n{plan}")
    return notes
