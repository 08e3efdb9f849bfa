"""Benchmarks of the LAT service (`make bench`; see bench/README.md). Prints figures, not
pass/fail: exits 0 even when a target is missed, non-zero when a request failed.

    python bench/run.py [--only api] [--duration 10] [--workers 3] [--connections 6] ...
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import config, http_load, report
from bench.context import Context, SectionResult, log
from bench.sections import SECTIONS

DEFAULT_WORKERS = 3


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="bench/run.py", description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="SECTION",
        help=f"run only these sections (repeat or comma-separate): {', '.join(SECTIONS)}",
    )
    parser.add_argument("--list", action="store_true", help="list the sections and exit")
    load = parser.add_argument_group("load")
    load.add_argument("--duration", type=float, default=10.0, help="seconds measured per endpoint")
    load.add_argument("--warmup", type=float, default=3.0, help="seconds of warm-up per endpoint")
    load.add_argument(
        "--workers",
        type=int,
        default=DEFAULT_WORKERS,
        help=f"gunicorn sync workers (default {DEFAULT_WORKERS})",
    )
    load.add_argument(
        "--connections",
        type=int,
        default=0,
        help="concurrent connections (default 2 x workers)",
    )
    load.add_argument(
        "--max-requests",
        type=int,
        default=200_000,
        help="cap on requests per measured run (0 = none; default 200000)",
    )
    load.add_argument(
        "--loadgen",
        choices=("auto", "wrk", "python"),
        default="auto",
        help="load generator: wrk, Python, or auto (wrk if on PATH, else Python)",
    )
    load.add_argument("--threads", type=int, default=1, help="wrk threads (default 1)")
    load.add_argument(
        "--quiet-wait",
        type=float,
        default=10.0,
        help="before each measured run, wait up to this many seconds for other processes to\n"
        "leave the CPUs alone (0 = do not wait; default 10)",
    )
    data = parser.add_argument_group("data")
    data.add_argument(
        "--deposits", type=int, default=1_000_000, help="deposits seeded (default 1000000)"
    )
    data.add_argument("--reseed", action="store_true", help="drop and reseed the bench database")
    data.add_argument(
        "--db-name",
        default=config.DEFAULT_BENCH_DB,
        help="bench database on DATABASE_URL's server",
    )
    parser.add_argument(
        "--explain",
        action="store_true",
        help="also print EXPLAIN ANALYZE and in-process timings of the deposit listing",
    )
    args = parser.parse_args(argv)
    args.only = [name for item in args.only for name in item.split(",") if name]
    unknown = [name for name in args.only if name not in SECTIONS]
    if unknown:
        parser.error(f"unknown section(s) {', '.join(unknown)}; known: {', '.join(SECTIONS)}")
    if args.connections <= 0:
        args.connections = 2 * args.workers
    if args.deposits < 100:
        parser.error("--deposits must be at least 100")
    return args


def main(argv: list[str] | None = None) -> int:
    started = time.monotonic()
    load_at_start = os.getloadavg()
    args = parse_args(argv)
    if args.list:
        for section in SECTIONS.values():
            print(f"{section.name:12s} {section.title}")
        return 0
    env = config.base_env()
    os.environ.update(env)  # the runner itself sets Django up for seeding and in-process timings
    db_url = config.with_database(env["DATABASE_URL"], args.db_name)
    if args.loadgen == "wrk" and not http_load.wrk_available():
        log("bench: --loadgen wrk, but wrk is not on PATH (install it, or use --loadgen python)")
        return 2
    if args.loadgen == "auto":
        args.loadgen = "wrk" if http_load.wrk_available() else "python"
    log(f"bench: load generator {args.loadgen}")

    ctx = Context(args=args, env=env, db_url=db_url, log=log)
    names = args.only or list(SECTIONS)
    results = []
    for name in names:
        log(f"bench: section {name}")
        try:
            results.append(SECTIONS[name].run(ctx))
        except Exception:  # one broken section must not lose the others' figures
            log(traceback.format_exc())
            results.append(
                SectionResult(
                    name=name,
                    title=SECTIONS[name].title,
                    failures=[f"the section crashed:\n{traceback.format_exc(limit=-3)}"],
                )
            )

    machine = config.machine_facts()
    machine["load average"] = (
        f"{load_at_start[0]:.2f} at start, {os.getloadavg()[0]:.2f} at end (1 min)"
    )
    machine["software"] = config.software_versions(db_url)
    generator = http_load.wrk_version() if args.loadgen == "wrk" else "Python (bench/http_load.py)"
    print()
    print(report.facts("Machine", machine))
    print(
        report.facts(
            "Settings",
            {
                "sections": ", ".join(names),
                "gunicorn": f"{args.workers} sync workers, access log off, 127.0.0.1",
                "load": (
                    f"{generator}, {args.connections} connections"
                    + (f", {args.threads} thread(s)" if args.loadgen == "wrk" else "")
                ),
                "duration": (
                    f"{args.duration:g} s measured after {args.warmup:g} s warm-up per endpoint, "
                    f"cap {args.max_requests:,} requests"
                ),
                "database": (
                    f"{config.database_name(db_url)}: {args.deposits:,} deposits"
                    + (
                        f" (seeded this run in {ctx._dataset.seed_seconds:.0f} s)"
                        if ctx._dataset and ctx._dataset.seeded_now
                        else " (reused)"
                        if ctx._dataset
                        else ""
                    )
                ),
            },
        )
    )
    for result in results:
        print()
        print(report.section(result))
    failed = [f for result in results for f in result.failures]
    missed = [t for result in results for t in result.targets if not t.met]
    print()
    print(
        f"Bench finished in {time.monotonic() - started:.0f} s: "
        f"{len(missed)} target(s) missed, {len(failed)} failure(s)."
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
