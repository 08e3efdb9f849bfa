"""Benchmarks of the LAT service (`make bench`; see bench/README.md). Prints figures, not
pass/fail: exits 0 even when a target is missed, non-zero when a request failed.

    python bench/run.py [--only api] [--duration 10] [--workers 3] [--connections 6] ...
"""

from __future__ import annotations

import argparse
import importlib
import os
import platform
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
    for name in "api restaking indexing activity faults freshness peers stream webhooks".split()
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
OPTIONS = [  # flag, type, default, help
    ("--duration", float, 10.0, "seconds measured per endpoint (default 10)"),
    ("--warmup", float, 3.0, "seconds of warm-up per endpoint (default 3)"),
    ("--workers", int, 3, "gunicorn workers (default 3)"),
    ("--connections", int, 0, "concurrent connections (default 2 x workers)"),
    ("--quiet-wait", float, 10.0, "wait up to this many s for a quiet machine (0 = do not)"),
    ("--deposits", int, 1_000_000, "deposits seeded (default 1000000)"),
    ("--db-name", str, "lat_bench", "bench database on DATABASE_URL's server"),
]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="bench/run.py", description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    known = ", ".join(SECTIONS)
    parser.add_argument("--only", action="append", default=[], help=f"(repeatable): {known}")
    parser.add_argument("--list", action="store_true", help="list the sections and exit")
    for flag, kind, default, text in OPTIONS:
        parser.add_argument(flag, type=kind, default=default, help=text)
    args = parser.parse_args(argv)
    args.only = [name for item in args.only for name in item.split(",") if name]
    if unknown := [name for name in args.only if name not in SECTIONS]:
        parser.error(f"unknown section(s) {', '.join(unknown)}; known: {known}")
    if args.deposits < 100:
        parser.error("--deposits must be at least 100")
    args.connections = args.connections if args.connections > 0 else 2 * args.workers
    return args


def header(args, db_url: str, load_at_start: float, names, data) -> list[tuple[str, dict]]:
    """The machine's and the software's facts, and the settings, for the report's header."""
    cpu = Path("/proc/cpuinfo").read_text().split("model name", 1)[-1].split("\n")[0]
    mem = Path("/proc/meminfo").read_text().split("MemTotal:", 1)[-1].split()[0]
    try:
        with dataset.connect(dataset.with_database(db_url, "postgres")) as conn:
            postgres = conn.execute("SHOW server_version").fetchone()[0].split()[0]
    except Exception:
        postgres = "?"
    wrk = subprocess.run(["wrk", "--version"], capture_output=True, text=True, check=False)
    seeded = " (reused)" if data and data.seed_seconds is None else ""
    if data and data.seed_seconds is not None:
        seeded = f" (seeded this run in {data.seed_seconds:.0f} s)"
    end = os.getloadavg()[0]
    machine = {
        "nproc": str(len(os.sched_getaffinity(0))),
        "cpu": cpu.split(":", 1)[-1].strip(),
        "memory": f"{int(mem) / 1024 / 1024:.1f} GiB",
        "os": platform.platform(),
        "python": platform.python_version(),
        "load average": f"{load_at_start:.2f} at start, {end:.2f} at end (1 min)",
        "software": f"PostgreSQL {postgres}, gunicorn {version('gunicorn')}, "
        f"Django {version('django')}",
    }
    settings = {
        "sections": ", ".join(names),
        "gunicorn": f"{args.workers} sync workers, access log off, 127.0.0.1",
        "load": f"{(wrk.stdout or wrk.stderr).strip().splitlines()[0]}, "
        f"{args.connections} connections, 1 thread",
        "duration": f"{args.duration:g} s measured after {args.warmup:g} s warm-up per endpoint",
        "database": f"{args.db_name}: {args.deposits:,} deposits{seeded}",
    }
    return [("Machine", machine), ("Settings", settings)]


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
    ctx = Context(args=args, env=env, db_url=db_url, log=log)
    names, results = args.only or list(SECTIONS), []
    for name in names:
        log(f"bench: section {name}")
        results.append(SectionResult(name=name, title=SECTIONS[name].TITLE))
        try:
            SECTIONS[name].run(ctx, results[-1])
        except Exception:  # one broken section must not lose the others' figures
            log(traceback.format_exc())
            crash = traceback.format_exc(limit=-3)
            results[-1].failures.append(f"the section crashed:\n{crash}")
    for title, items in header(args, db_url, load_at_start, names, ctx.data):
        width = max(len(k) for k in items)
        print(f"\n{title}", *(f"  {k.ljust(width)}  {v}" for k, v in items.items()), sep="\n")
    for result in results:
        print(f"\n{report(result)}")
    failed = [f for result in results for f in result.failures]
    missed = [t for result in results for t in result.targets if not t.met]
    print(
        f"\nBench finished in {time.monotonic() - started:.0f} s: "
        f"{len(missed)} target(s) missed, {len(failed)} failure(s)."
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
