"""Benchmarks of the LAT service (`make bench`; see bench/README.md). Prints figures, not
pass/fail: exits 0 even when a target is missed, non-zero when a request failed.

    python bench/run.py [--only api] [--duration 10] [--workers 3] [--connections 6] ...
"""

from __future__ import annotations

import argparse
import importlib
import os
import platform
import shutil
import subprocess
import sys
import time
import traceback
from importlib.metadata import version
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import dataset
from bench.context import Context, SectionResult, table

SECTIONS = {
    name: importlib.import_module(f"bench.sections.{name}")
    for name in ("api", "restaking", "indexing", "activity", "faults", "freshness", "peers")
}
# The Makefile's TEST_ENV, so that `python bench/run.py` also works without `make`.
TEST_ENV_DEFAULTS = {
    "DJANGO_DEBUG": "false",
    "DJANGO_SECRET_KEY": "test-only-secret-key-not-for-production",
    "SECURE_SSL_REDIRECT": "false",
    "SESSION_COOKIE_SECURE": "false",
    "CSRF_COOKIE_SECURE": "false",
    "DATABASE_URL": "postgres://postgres@127.0.0.1:5432/lat",
    "REDIS_URL": "redis://127.0.0.1:6379/15",
    "DJANGO_SETTINGS_MODULE": "latsite.settings",
}


OPTIONS = [  # flag, type (bool: a switch, list: repeatable, tuple: the choices), default, help
    ("--only", list, [], f"only these sections (repeatable, or a,b): {', '.join(SECTIONS)}"),
    ("--list", bool, False, "list the sections and exit"),
    ("--loadgen", ("auto", "wrk", "python"), "auto", "wrk, Python, or auto: wrk if on PATH"),
    ("--duration", float, 10.0, "seconds measured per endpoint (default 10)"),
    ("--warmup", float, 3.0, "seconds of warm-up per endpoint (default 3)"),
    ("--workers", int, 3, "gunicorn workers (default 3)"),
    ("--connections", int, 0, "concurrent connections (default 2 x workers)"),
    ("--max-requests", int, 200_000, "cap on requests per measured run (0 = none)"),
    ("--threads", int, 1, "wrk threads (default 1)"),
    ("--quiet-wait", float, 10.0, "wait up to this many s for a quiet machine (0 = do not)"),
    ("--deposits", int, 1_000_000, "deposits seeded (default 1000000)"),
    ("--reseed", bool, False, "drop and reseed the bench database"),
    ("--db-name", str, "lat_bench", "bench database on DATABASE_URL's server"),
    ("--explain", bool, False, "also EXPLAIN ANALYZE and time the deposit listing in process"),
]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="bench/run.py",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    for flag, kind, default, text in OPTIONS:
        if kind is bool:
            parser.add_argument(flag, action="store_true", help=text)
        elif kind is list:
            parser.add_argument(flag, action="append", default=[], metavar="SECTION", help=text)
        elif isinstance(kind, tuple):
            parser.add_argument(flag, choices=kind, default=default, help=text)
        else:
            parser.add_argument(flag, type=kind, default=default, help=text)
    args = parser.parse_args(argv)
    args.only = [name for item in args.only for name in item.split(",") if name]
    if unknown := [name for name in args.only if name not in SECTIONS]:
        parser.error(f"unknown section(s) {', '.join(unknown)}; known: {', '.join(SECTIONS)}")
    if args.deposits < 100:
        parser.error("--deposits must be at least 100")
    args.connections = args.connections if args.connections > 0 else 2 * args.workers
    wrk = shutil.which("wrk")
    if args.loadgen == "wrk" and wrk is None:
        parser.error("--loadgen wrk: wrk is not on PATH (install it, or use --loadgen python)")
    if args.loadgen == "auto":
        args.loadgen = "wrk" if wrk else "python"
    return args


def machine(db_url: str, load_at_start: float) -> dict[str, str]:
    """The machine's and the software's facts, for the report's header."""
    cpu = Path("/proc/cpuinfo").read_text().split("model name", 1)[-1].split("\n")[0]
    mem = Path("/proc/meminfo").read_text().split("MemTotal:", 1)[-1].split()[0]
    try:
        with dataset.connect(dataset.with_database(db_url, "postgres")) as conn:
            postgres = conn.execute("SHOW server_version").fetchone()[0].split()[0]
    except Exception:
        postgres = "?"
    return {
        "nproc": str(len(os.sched_getaffinity(0))),
        "cpu": cpu.split(":", 1)[-1].strip(),
        "memory": f"{int(mem) / 1024 / 1024:.1f} GiB",
        "os": platform.platform(),
        "python": platform.python_version(),
        "load average": f"{load_at_start:.2f} at start, {os.getloadavg()[0]:.2f} at end (1 min)",
        "software": f"PostgreSQL {postgres}, gunicorn {version('gunicorn')}, "
        f"Django {version('django')}",
    }


def settings(args: argparse.Namespace, names: list[str], data: dataset.Dataset | None):
    load = f"Python (bench/load.py), {args.connections} connections"
    if args.loadgen == "wrk":
        out = subprocess.run(["wrk", "--version"], capture_output=True, text=True, check=False)
        load = (out.stdout or out.stderr).strip().splitlines()[0]
        load += f", {args.connections} connections, {args.threads} thread(s)"
    seeded = " (reused)" if data and data.seed_seconds is None else ""
    if data and data.seed_seconds is not None:
        seeded = f" (seeded this run in {data.seed_seconds:.0f} s)"
    return {
        "sections": ", ".join(names),
        "gunicorn": f"{args.workers} sync workers, access log off, 127.0.0.1",
        "load": load,
        "duration": f"{args.duration:g} s measured after {args.warmup:g} s warm-up per endpoint, "
        f"cap {args.max_requests:,} requests",
        "database": f"{args.db_name}: {args.deposits:,} deposits{seeded}",
    }


def facts(title: str, items: dict[str, str]) -> str:
    width = max(len(k) for k in items)
    return "\n".join([title, *(f"  {k.ljust(width)}  {v}" for k, v in items.items())])


def report(result: SectionResult) -> str:
    parts = [f"== {result.name}: {result.title} ==", *table(result.columns, result.rows)]
    if result.targets:
        parts += ["", "Targets:"]
        for target in result.targets:
            mark = "MET   " if target.met else "MISSED"
            parts.append(f"  [{mark}] {target.description}: {target.detail}")
    parts += result.notes
    parts += [f"  FAILED: {failure}" for failure in result.failures]
    return "\n".join(parts)


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    started, load_at_start = time.monotonic(), os.getloadavg()[0]
    args = parse_args(argv)
    if args.list:
        for name, section in SECTIONS.items():
            print(f"{name:12s} {section.TITLE}")
        return 0
    env = {**TEST_ENV_DEFAULTS, **os.environ}
    db_url = dataset.with_database(env["DATABASE_URL"], args.db_name)
    log(f"bench: load generator {args.loadgen}")
    ctx = Context(args=args, env=env, db_url=db_url, log=log)
    names = args.only or list(SECTIONS)
    results = []
    for name in names:
        log(f"bench: section {name}")
        results.append(SectionResult(name=name, title=SECTIONS[name].TITLE))
        try:
            SECTIONS[name].run(ctx, results[-1])
        except Exception:  # one broken section must not lose the others' figures
            log(traceback.format_exc())
            crash = traceback.format_exc(limit=-3)
            results[-1].failures.append(f"the section crashed:\n{crash}")
    print()
    print(facts("Machine", machine(db_url, load_at_start)))
    print(facts("Settings", settings(args, names, ctx.data)))
    for result in results:
        print()
        print(report(result))
    failed = [f for result in results for f in result.failures]
    missed = [t for result in results for t in result.targets if not t.met]
    print(
        f"\nBench finished in {time.monotonic() - started:.0f} s: "
        f"{len(missed)} target(s) missed, {len(failed)} failure(s)."
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
