"""Section `api`: read endpoints of the production server under concurrent load.

Each endpoint gets a warm-up, then `--duration` seconds of closed-loop load from
`--connections` connections. Throughput is compared with `GET /bench/baseline`, a DRF view that
answers constant JSON through the same middleware, DRF and gunicorn stack but reads no database:
the ratio shows what the endpoint's own work (queries, serialisation) costs.
"""

from __future__ import annotations

import json
import statistics
import time

from bench.context import QUIET_CORES, Context, SectionResult, Target
from bench.http_load import LoadResult

TITLE = "HTTP read endpoints under load (gunicorn, bench database)"
DEEP_SKIP = 900_000
MIN_RATIO = 0.30  # each API endpoint: at least 30% of the baseline's throughput
MAX_DEEP_P50_FACTOR = 2.0  # the deep page's p50 within 2x the first page's
PAIRED_OF = ("deposits first page", "deposits deep page")
PAIRED = ("first and deep pages together", "")


def _endpoints(ctx: Context) -> list[tuple[str, str]]:
    lat = ctx.dataset().primary_lat
    skip = min(DEEP_SKIP, max(0, ctx.args.deposits - 12))
    return [
        ("baseline", "/bench/baseline"),
        ("lat list", "/lat"),
        ("lat detail", f"/lat/{lat}?withTvl=true&withCuratedMetadata=true&withRewards=true"),
        ("deposits first page", "/metrics/deposits"),
        ("deposits deep page", f"/metrics/deposits?skip={skip}"),
    ]


def _smoke(name: str, status: int, body: bytes, ctx: Context) -> str | None:
    """Why one answer is not what the endpoint should give for the data set, or None."""
    if status != 200:
        return f"{name}: HTTP {status}: {body[:300]!r}"
    try:
        data = json.loads(body)
    except ValueError:
        return f"{name}: not JSON: {body[:300]!r}"
    deposits = ctx.dataset().deposits
    if name.startswith("baseline"):
        return None if "data" in data else f"{name}: unexpected body {body[:200]!r}"
    if name.startswith("deposits"):
        if data.get("meta", {}).get("total") != deposits:
            return f"{name}: meta.total is {data.get('meta')}, expected {deposits:,}"
        if len(data.get("data") or []) != 12:
            return f"{name}: {len(data.get('data') or [])} rows, expected 12"
    elif name == "lat list" and len(data.get("data") or []) != len(ctx.dataset().lats):
        return f"{name}: {len(data.get('data') or [])} LATs, expected {len(ctx.dataset().lats)}"
    elif name == "lat detail" and "tvl" not in data:
        return f"{name}: no tvl in {body[:200]!r}"
    return None


def _per_cpu_ratio(load: LoadResult, baselines: list[LoadResult]) -> float | None:
    """Requests per bench CPU-second, relative to the baseline's."""
    base = [b.requests / b.cpu.ours for b in baselines if b.cpu and b.cpu.ours]
    if not base or not load.cpu or not load.cpu.ours:
        return None
    return load.requests / load.cpu.ours / statistics.mean(base)


def _check(result, name, path, load: LoadResult, server, ctx: Context, started: float) -> None:
    """Log one measurement; record it as a failure if any request failed."""
    ctx.log(
        f"api: {name}: {load.rps:,.0f} req/s, p50 {load.p50_ms:.2f} ms, "
        f"p99 {load.p99_ms:.2f} ms, {load.errors} errors, "
        f"other CPU {load.cpu.other_cores if load.cpu else 0:.2f} cores "
        f"({time.monotonic() - started:.0f} s)"
    )
    if load.errors:
        result.failures.append(
            f"{name} ({path}): {load.non200} answers not 200 and {load.socket_errors} "
            f"socket errors out of {load.requests:,} requests; server log:\n"
            f"{server.log_tail(20)}"
        )


def _cpu(load: LoadResult) -> str:
    if load.cpu is None:
        return "-"
    c = load.cpu
    return "/".join(
        f"{x:.2f}" for x in (c.cores("server"), c.cores("db"), c.cores("loadgen"), c.other_cores)
    )


def _fmt(x: float, digits: int = 1) -> str:
    return f"{x:,.{digits}f}"


def run(ctx: Context) -> SectionResult:
    result = SectionResult(
        name="api",
        title=TITLE,
        columns=[
            "endpoint",
            "req/s",
            "p50 ms",
            "p90 ms",
            "p99 ms",
            "vs baseline",
            "requests",
            "errors",
            "CPU srv/db/gen/other",
            "req/CPU-s",
        ],
    )
    endpoints = _endpoints(ctx)
    paths = dict(endpoints)
    # The baseline runs first and again last: the two should agree on a quiet machine. Before
    # the last, the first and deep deposit pages run together (PAIRED), each on half the
    # connections: both see the same machine, so their p50s compare even on a busy one.
    plan = [*endpoints, PAIRED, ("baseline (again)", endpoints[0][1])]
    measured: dict[str, LoadResult] = {}
    with ctx.server() as server:
        for name, path in plan:
            if (name, path) == PAIRED:
                if not all(n in measured for n in PAIRED_OF):
                    continue
                started = time.monotonic()
                loads = ctx.load_together([server.url(paths[n]) for n in PAIRED_OF])
                for n, load in zip(PAIRED_OF, loads, strict=True):
                    measured[f"{n} (paired)"] = load
                    _check(result, f"{n} (paired)", paths[n], load, server, ctx, started)
                continue
            status, body = server.get(path)
            problem = _smoke(name, status, body, ctx)
            if problem:
                result.failures.append(problem)
                ctx.log(f"api: {problem}")
                continue
            started = time.monotonic()
            measured[name] = ctx.load(server.url(path))
            _check(result, name, path, measured[name], server, ctx, started)
        if ctx.args.explain:
            result.notes.extend(_explain(ctx))
    plan = [
        *endpoints,
        *((f"{n} (paired)", paths[n]) for n in PAIRED_OF),
        ("baseline (again)", endpoints[0][1]),
    ]

    baselines = [measured[n] for n in ("baseline", "baseline (again)") if n in measured]
    baseline_rps = statistics.mean(b.rps for b in baselines) if baselines else 0.0
    for name, path in plan:
        load = measured.get(name)
        if load is None:
            result.rows.append([name, "-", "-", "-", "-", "-", "-", "failed", "-", "-"])
            continue
        ratio = load.rps / baseline_rps if baseline_rps else float("nan")
        shown = path if len(path) < 40 else path[:37] + "..."
        alone = not name.endswith("(paired)")  # paired rows share the server and the CPU
        result.rows.append(
            [
                f"{name}  GET {shown}",
                _fmt(load.rps, 0),
                _fmt(load.p50_ms, 2),
                _fmt(load.p90_ms, 2),
                _fmt(load.p99_ms, 2),
                f"{ratio:.0%}" if alone else "-",
                f"{load.requests:,}" + (" (cap)" if load.capped else ""),
                str(load.errors),
                _cpu(load),
                f"{load.requests / load.cpu.ours:,.0f}"
                if alone and load.cpu and load.cpu.ours
                else "-",
            ]
        )
    result.notes.append(
        "\nvs baseline: req/s over the mean of the two baseline runs. CPU: cores used by the "
        "gunicorn workers / the PostgreSQL backends / the load generator / everything else on "
        "the machine. req/CPU-s: requests per CPU-second of the bench's processes (steadier "
        "than req/s on a shared machine). (paired): the two deposit pages loaded at the same "
        f"time, {max(1, ctx.args.connections // 2)} connections each, for comparing their "
        "latencies under identical conditions; the CPU column is the pair's."
    )
    if len(baselines) == 2:
        drift = abs(baselines[0].rps - baselines[1].rps) / max(b.rps for b in baselines)
        if drift > 0.10:
            result.notes.append(
                f"WARNING: the two baseline runs differ by {drift:.0%}: the machine's capacity "
                "changed during the run; compare figures with care."
            )
    busy = [n for n, load in measured.items() if load.cpu and load.cpu.other_cores > QUIET_CORES]
    if busy:
        result.notes.append(
            f"WARNING: other processes took > {QUIET_CORES} cores during: {', '.join(busy)}; "
            "those req/s figures are disturbed (req/CPU-s less so). Rerun on a quiet machine."
        )

    if baseline_rps:
        for name, _ in endpoints[1:]:
            load = measured.get(name)
            if load is None:
                result.targets.append(Target(f"{name} >= 30% of baseline req/s", False, "failed"))
                continue
            ratio = load.rps / baseline_rps
            per_cpu = _per_cpu_ratio(load, baselines)
            result.targets.append(
                Target(
                    f"{name} >= {MIN_RATIO:.0%} of baseline req/s",
                    ratio >= MIN_RATIO,
                    f"{ratio:.1%} ({load.rps:,.0f} vs {baseline_rps:,.0f} req/s)"
                    + (f"; per CPU-second {per_cpu:.1%}" if per_cpu is not None else ""),
                )
            )
    first, deep = measured.get("deposits first page"), measured.get("deposits deep page")
    pfirst = measured.get("deposits first page (paired)")
    pdeep = measured.get("deposits deep page (paired)")
    if first and deep:
        alone = deep.p50_ms / first.p50_ms if first.p50_ms else float("inf")
        paired = pdeep.p50_ms / pfirst.p50_ms if pfirst and pdeep and pfirst.p50_ms else None
        # Decided on the paired run when there is one: it does not depend on the machine's
        # load changing between two runs.
        factor = paired if paired is not None else alone
        detail = (
            f"{paired:.2f}x run together ({pdeep.p50_ms:.2f} vs {pfirst.p50_ms:.2f} ms); "
            if paired is not None
            else ""
        )
        result.targets.append(
            Target(
                f"deep page p50 within {MAX_DEEP_P50_FACTOR:g}x of first page p50",
                factor <= MAX_DEEP_P50_FACTOR,
                detail + f"{alone:.2f}x run one after the other "
                f"({deep.p50_ms:.2f} vs {first.p50_ms:.2f} ms)",
            )
        )
    return result


def _explain(ctx: Context) -> list[str]:
    """In-process: the deposit listing's queries, their plans and the selector's own time."""
    ctx.django()
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from deposits.selectors import deposit_page

    notes = ["", "Deposit listing, in process (--explain):"]
    skip_deep = min(DEEP_SKIP, max(0, ctx.args.deposits - 12))
    for skip in (0, skip_deep):
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
