"""Section `api`: the read endpoints under closed-loop load, beside `GET /bench/baseline` (constant
JSON through the same stack, no database): the ratio is what the endpoint's own work costs. The
LAT list and detail also run on a second server with DOCUMENT_CACHE_SECONDS=0 (the miss path)."""

from __future__ import annotations

import json
import statistics

from bench import dataset
from bench.context import Context, SectionResult
from bench.load import children_of

TITLE = "HTTP read endpoints under load (gunicorn, bench database)"
MIN_RATIO = 0.30  # each endpoint: at least 30% of the baseline's throughput
UNCACHED = {"lat list (uncached)": "lat list", "lat detail (uncached)": "lat detail"}
MIN_UNCACHED_RATIO = 0.50
MAX_DEEP_P50_FACTOR = 2.0  # a deep page's p50 within 2x the first page's, loaded together
PAIRS = (
    ("deposits first page", "deposits deep page"),
    ("deposits first page", "deposits cursor deep page"),
    ("sender first page", "sender page 900"),
)
# Ratio targets are decided on interleaved runs (ROUNDS rounds of ROUND_SECONDS, the order
# alternating): the machine's capacity drifts by tens of percent within a minute here.
ROUNDS, ROUND_SECONDS = 6, 2.0
COLUMNS = ["endpoint", "req/s", "p50 ms", "p90 ms", "p99 ms", "vs baseline", "requests"]
COLUMNS += ["errors", "CPU srv/db/gen/other", "req/CPU-s"]


def endpoints(ctx: Context) -> dict[str, str]:
    """Name: path of the baseline and the read endpoints."""
    lat, sender = ctx.dataset().primary_lat, dataset.address("user:0")  # a tenth of the deposits
    by_sender, deep = f"/metrics/deposits?sender={sender}&take=100", _deep_skip(ctx)
    return {
        "baseline": "/bench/baseline",
        "lat list": "/lat",
        "lat detail": f"/lat/{lat}?withTvl=true&withCuratedMetadata=true&withRewards=true",
        "deposits first page": "/metrics/deposits",
        "deposits deep page": f"/metrics/deposits?skip={deep}",
        "deposits cursor deep page": f"/metrics/deposits?cursor={_cursor(ctx, deep)}",
        "sender first page": by_sender,
        "sender page 900": f"{by_sender}&cursor={_cursor(ctx, 899 * 100, sender)}",
    }


def _cursor(ctx: Context, position: int, sender: str | None = None) -> str:
    """The cursor a client following the listing (newest first) holds after `position` records."""
    ctx.django()
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
    return min(900_000, max(0, ctx.args.deposits - 12))


def answer(name: str, status: int, body: bytes) -> tuple[dict, str | None]:
    """A 200's JSON object, or why the answer is not one."""
    try:
        data = json.loads(body) if status == 200 else None
    except ValueError:
        data = None
    return data or {}, None if isinstance(data, dict) else f"{name}: HTTP {status}: {body[:300]!r}"


def smoke(ctx: Context, name: str, status: int, body: bytes) -> str | None:
    """Why one answer is not what the endpoint should give for the data set, or None."""
    data, problem = answer(name, status, body)
    rows, total, expect = len(data.get("data") or []), data.get("meta", {}).get("total"), ctx.data
    whale = int(expect.deposits * dataset.WHALE_SHARE)
    if name.startswith("deposits"):
        problem = problem or (total != expect.deposits or rows != 12)
    elif name.startswith("sender"):
        problem = problem or not (0.9 * whale < (total or 0) < 1.1 * whale and rows == 100)
    elif name == "lat list":
        problem = problem or rows != len(expect.lats)
    else:
        problem = problem or ("tvl" if name == "lat detail" else "data") not in data
    return f"{name}: unexpected answer {body[:300]!r}" if problem is True else problem or None


def run(ctx: Context, result: SectionResult) -> None:
    paths = endpoints(ctx)
    with ctx.server() as cached, ctx.server(DOCUMENT_CACHE_SECONDS="0") as uncached:
        plan = {}
        for name, path in paths.items():  # each uncached row after the cached one
            plan[name] = (cached, path)
            plan |= {row: (uncached, path) for row, of in UNCACHED.items() if of == name}

        def check(name: str, server, path: str) -> str | None:
            """The smoke check; an uncached answer must also be the cached one, byte for byte."""
            got = server.get(path)
            if (problem := smoke(ctx, UNCACHED.get(name, name), *got)) or server is cached:
                return problem
            return None if cached.get(path) == got else f"{name}: differs from the cached answer"

        measured = pages(ctx, result, plan, PAIRS, check)
    result.notes.append(
        "\nvs baseline: req/s over the mean of the two baseline runs. CPU: cores used by the "
        "gunicorn workers / the PostgreSQL backends / the load generator / everything else. "
        "req/CPU-s: requests per CPU-second of the bench's processes. (uncached): a second "
        "server with DOCUMENT_CACHE_SECONDS=0. Ratio targets are decided on interleaved runs "
        f"({ROUNDS} rounds of {ROUND_SECONDS:g} s, the order alternating); the ratio of runs far "
        f"apart is printed beside. (pair N): a first and a deep page loaded together, "
        f"{max(1, ctx.args.connections // 2)} connections each; the CPU column is the pair's."
    )
    minimum = {name: MIN_UNCACHED_RATIO for name in UNCACHED}
    report(result, plan, PAIRS, measured, lambda name: minimum.get(name, MIN_RATIO))


def pages(ctx: Context, result: SectionResult, plan: dict, pairs, check) -> dict:
    """Each endpoint of `plan` ({name: (server, path)}, "baseline" first) alone after its smoke
    check (`check(name, server, path)`: why the answer is wrong, or None), each pair of pages
    together, the baseline again; then each endpoint interleaved with the baseline."""
    runs = [[(name, name)] for name in plan]
    runs += [[(f"{n} (pair {k + 1})", n) for n in pair] for k, pair in enumerate(pairs)]
    measured = {}
    for run in [*runs, [("baseline (again)", "baseline")]]:
        server, path = plan[run[0][1]]
        if len(run) == 1 and (problem := check(run[0][1], server, path)):
            result.failures.append(problem)
            continue
        if not all(n in measured for _, n in run[1:]):
            continue
        urls, warmup = [server.url(plan[n][1]) for _, n in run], ctx.args.warmup * (len(run) == 1)
        pids = {"server": children_of(server.process.pid)}
        for (label, n), load in zip(run, ctx.measure(urls, warmup=warmup, pids=pids), strict=True):
            measured[label] = load
            ctx.log(f"{result.name}: {label}: {load.rps:,.0f} req/s, p50 {load.p50_ms:.2f} ms")
            result.check(f"{label} ({plan[n][1]})", load, server)
    base = plan["baseline"][0].url(plan["baseline"][1])
    for name, (server, path) in list(plan.items())[1:]:
        if name in measured:
            sides = [(base, None), (server.url(path), None)]
            theirs, mine = ctx.interleave(sides, rounds=ROUNDS, duration=ROUND_SECONDS)
            measured[f"{name} (interleaved)"], measured[f"{name} (its baseline)"] = mine, theirs
            result.check(f"{name} interleaved with the baseline", mine, server)
    return measured


def report(result: SectionResult, plan: dict, pairs, measured: dict, minimum) -> None:
    """The rows, the warnings, the ratio targets (at least `minimum(name)` of the baseline's
    req/s) and the depth targets."""
    result.columns = COLUMNS
    baselines = [measured[n] for n in ("baseline", "baseline (again)") if n in measured]
    base_rps = statistics.mean(b.rps for b in baselines) if baselines else 0.0
    labels = [*plan, *(f"{n} (pair {k + 1})" for k, pair in enumerate(pairs) for n in pair)]
    for label in [*labels, "baseline (again)"]:
        path = plan[label.split(" (pair")[0].removesuffix(" (again)")][1]
        result.rows.append(_row(label, path, measured.get(label), base_rps))
    drift = abs(baselines[0].rps - baselines[-1].rps) / max(b.rps for b in baselines or [0, 1])
    if drift > 0.10:
        result.notes.append(
            f"WARNING: the two baseline runs differ by {drift:.0%}: the machine's capacity "
            "changed during the run; compare figures with care."
        )
    result.warn_busy({k: v.cpu for k, v in measured.items()}, "req/s figures are disturbed")
    per_cpu = [b.requests / b.cpu.ours for b in baselines if b.cpu.ours]
    for name in list(plan)[1:]:
        load, mine = measured.get(name), measured.get(f"{name} (interleaved)")
        theirs, description = measured.get(f"{name} (its baseline)"), f"{name} >= "
        description += f"{minimum(name):.0%} of baseline req/s"
        if not (load and mine and theirs and theirs.rps and base_rps):
            result.target(description, 0, "failed", also=False)
            continue
        detail = f"{mine.rps / theirs.rps:.1%} interleaved ({mine.rps:,.0f} vs {theirs.rps:,.0f} "
        detail += f"req/s, {ROUNDS} rounds of {ROUND_SECONDS:g} s); {load.rps / base_rps:.1%} run "
        detail += f"apart ({load.rps:,.0f} vs {base_rps:,.0f} req/s)"
        if per_cpu and load.cpu.ours:  # requests per bench CPU-second, over the baseline's
            detail += (
                f"; per CPU-second {load.requests / load.cpu.ours / statistics.mean(per_cpu):.1%}"
            )
        result.target(description, mine.rps / theirs.rps, detail, at_least=minimum(name))
    for k, pair in enumerate(pairs):
        first, deep = (measured.get(n) for n in pair)
        pfirst, pdeep = (measured.get(f"{n} (pair {k + 1})") for n in pair)
        description = f"{pair[1]} p50 within {MAX_DEEP_P50_FACTOR:g}x of {pair[0]} p50"
        if not (first and deep and pfirst and pdeep):
            result.target(description, 0, "failed", also=False)
            continue
        together, apart = pdeep.p50_ms / pfirst.p50_ms, deep.p50_ms / first.p50_ms
        detail = f"{together:.2f}x run together ({pdeep.p50_ms:.2f} vs {pfirst.p50_ms:.2f} ms); "
        detail += (
            f"{apart:.2f}x run one after the other ({deep.p50_ms:.2f} vs {first.p50_ms:.2f} ms)"
        )
        result.target(description, together, detail, at_most=MAX_DEEP_P50_FACTOR)


def _row(name: str, path: str, load, base_rps: float) -> list[str]:
    if load is None:
        return [name, "-", "-", "-", "-", "-", "-", "failed", "-", "-"]
    alone, cpu = "(pair" not in name, load.cpu  # paired rows share the server and the CPU
    return [
        f"{name}  GET {path if len(path) < 40 else path[:37] + '...'}",
        f"{load.rps:,.0f}",
        *(f"{ms:,.2f}" for ms in (load.p50_ms, load.p90_ms, load.p99_ms)),
        f"{load.rps / base_rps:.0%}" if alone and base_rps else "-",
        f"{load.requests:,}",
        str(load.errors),
        "/".join(
            f"{x:.2f}" for x in [*map(cpu.cores, ("server", "db", "loadgen")), cpu.other_cores]
        ),
        f"{load.requests / cpu.ours:,.0f}" if alone and cpu.ours else "-",
    ]
