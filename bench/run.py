"""Benchmarks of the LAT service (`make bench`; see bench/README.md). Prints figures, not
pass/fail: exits 0 even when a target is missed, non-zero when a request failed."""

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
from bench.context import Context, SectionResult

SECTIONS = (  # in running order, each bench/sections/<name>.py
    "api",
    "restaking",
    "indexing",
    "activity",
    "faults",
    "freshness",
    "peers",
    "stream",
    "webhooks",
    "yields",
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="bench/run.py", description=__doc__)
    parser.add_argument("--only", action="append", choices=SECTIONS, help="(repeatable)")
    parser.add_argument("--duration", type=float, default=10.0, help="s measured per endpoint")
    parser.add_argument("--warmup", type=float, default=3.0, help="s of warm-up per endpoint")
    parser.add_argument("--workers", type=int, default=3, help="gunicorn workers")
    parser.add_argument("--connections", type=int, default=0, help="default 2 x workers")
    parser.add_argument("--deposits", type=int, default=1_000_000, help="deposits seeded")
    parser.add_argument("--db-name", default="lat_bench", help="database on DATABASE_URL's server")
    args = parser.parse_args(argv)
    args.connections = args.connections or 2 * args.workers
    return args


def header(ctx: Context, load_at_start: float, names: list[str]) -> str:
    """The machine's and the software's facts, and the settings."""
    cpu = Path("/proc/cpuinfo").read_text().split("model name")[1].split("\n")[0].strip(": \t")
    memory = int(Path("/proc/meminfo").read_text().split()[1]) / 2**20
    with dataset.connect(dataset.with_database(ctx.db_url, "postgres")) as conn:
        postgres = conn.execute("SHOW server_version").fetchone()[0].split()[0]
    wrk = subprocess.run(["wrk", "--version"], capture_output=True, text=True)
    seeded = f" (seeded this run in {ctx.seeded:.0f} s)" if ctx.seeded else ""
    seeded, args = " (reused)" if ctx.seeded is None else seeded, ctx.args
    return f"""
Machine
  nproc         {len(os.sched_getaffinity(0))}
  cpu           {cpu}
  memory        {memory:.1f} GiB
  os            {platform.platform()}
  python        {platform.python_version()}
  load average  {load_at_start:.2f} at start, {os.getloadavg()[0]:.2f} at end (1 min)
  software      PostgreSQL {postgres}, gunicorn {version("gunicorn")}, Django {version("django")}

Settings
  sections  {", ".join(names)}
  gunicorn  {args.workers} sync workers, access log off, 127.0.0.1
  load      {(wrk.stdout or wrk.stderr).splitlines()[0]}, {args.connections} connections, 1 thread
  duration  {args.duration:g} s measured after {args.warmup:g} s warm-up per endpoint
  database  {args.db_name}: {args.deposits:,} deposits{seeded}"""


def main(argv: list[str] | None = None) -> int:
    started, load_at_start = time.monotonic(), os.getloadavg()[0]
    args = parse_args(argv)
    env = {"DJANGO_SETTINGS_MODULE": "latsite.settings", **os.environ}
    db_url = dataset.with_database(env["DATABASE_URL"], args.db_name)
    ctx = Context(args, env, db_url, lambda message: print(message, file=sys.stderr, flush=True))
    names, results = args.only or list(SECTIONS), []
    for name in names:
        ctx.log(f"bench: section {name}")
        section = importlib.import_module(f"bench.sections.{name}")
        results.append(SectionResult(name=name, title=section.TITLE))
        try:
            section.run(ctx, results[-1])
        except Exception:  # one broken section must not lose the others' figures
            ctx.log(traceback.format_exc())
            crash = traceback.format_exc(limit=-3)
            results[-1].failures.append(f"the section crashed:\n{crash}")
    print(header(ctx, load_at_start, names), *(f"\n{result}" for result in results), sep="\n")
    failed = sum(len(result.failures) for result in results)
    print(
        f"\nBench finished in {time.monotonic() - started:.0f} s: "
        f"{sum(r.missed for r in results)} target(s) missed, {failed} failure(s)."
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
