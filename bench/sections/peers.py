"""Section `peers`: the event indexer beside Ponder 0.16.10 on `activity`'s ~100,000 events, one
anvil and one PostgreSQL: events/s of each (ours at least 4x Ponder's) and CPU per event."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import bench
from bench import REPO, dataset, load
from bench.context import Context, Processes, SectionResult, wait_until
from bench.sections.activity import CHAIN_EVENTS, SPAN, generate

TITLE = "The event indexer beside Ponder on the same chain and PostgreSQL"
MIN_RATIO = 4.0
FINALITY = 32  # Ponder backfills up to head - 30 on a chain it does not know
PONDER = REPO / "var" / "peers" / "ponder"  # installed from bench/peers/, never a dependency
PONDER_CMD = ["node", str(PONDER / "node_modules/ponder/dist/esm/bin/ponder.js"), "--root"]
PONDER_CMD += [str(PONDER), "--log-format", "json", "start", "--schema", "peers"]
PONDER_CMD += ["-H", "127.0.0.1", "-p", "0"]
BACKENDS = "SELECT pid FROM pg_stat_activity WHERE datname LIKE %s"


def run(ctx: Context, result: SectionResult) -> None:
    shutil.copytree(REPO / "bench" / "peers", PONDER, dirs_exist_ok=True)
    marker, wanted = PONDER / "node_modules" / ".bench", (PONDER / "package.json").read_text()
    if not marker.exists() or marker.read_text() != wanted:  # package.json changed
        npm = ["npm", "install", "--no-audit", "--no-fund", "--loglevel=error"]
        subprocess.run(npm, cwd=PONDER, check=True)
        marker.write_text(wanted)
    usages, base = {}, ctx.db_name("peers").removesuffix("_bench")
    with ctx.devnet("peers") as (rpc, manifest, db_url), dataset.connect(db_url) as conn:
        conn.autocommit = True
        generate(rpc, manifest, CHAIN_EVENTS)
        last = int(bench.rpc(rpc, "eth_blockNumber"), 16)  # the events' last block
        bench.rpc(rpc, "anvil_mine", hex(FINALITY))

        def pids() -> dict[str, list[int]]:  # the bench's processes and both databases' backends
            backends = [pid for (pid,) in conn.execute(BACKENDS, [base + "%"])]
            return {"bench": load.children_of(os.getpid())[1:] + backends}

        def measured(label: str, fn) -> dict:  # others' CPU meanwhile in `usages`
            with load.CpuMonitor(pids) as monitor:
                out = fn()
            usages[label] = usage = monitor.usage  # the backends, gone by its end, are not others
            usage.others = max(0.0, usage.others - out["db_cpu"])
            return out

        def indexed() -> dict:  # ours, in the probe's process; Ponder's setup from it
            figures = ctx.probe("bench.sections.activity", rpc, manifest, db_url, str(SPAN), "1")
            setup.update(figures["setup"], rpc=rpc, endBlock=last)
            return figures["indexer"][0] | {k: figures["check"][k] for k in ("holders", "balances")}

        setup: dict = {}
        ours = measured("ours", indexed)
        ponder_url = dataset.with_database(db_url, ctx.db_name("peers_ponder"))
        peer = measured("Ponder", lambda: _ponder(ctx, setup, ponder_url, conn))
    result.columns = ["indexer", "events", "seconds", "events/s", "own CPU us/event"]
    result.columns.append("PostgreSQL CPU us/event")
    for label, r in (("ours: deposit_index", ours), ("Ponder 0.16.10", peer)):
        per = [f"{r[k] / r['events'] * 1e6:,.0f}" for k in ("cpu", "db_cpu")]
        rate = f"{r['events'] / r['seconds']:,.0f}"
        result.rows.append([label, f"{r['events']:,}", f"{r['seconds']:.2f}", rate, *per])
    ratio = (ours["events"] / ours["seconds"]) / (peer["events"] / peer["seconds"])
    cpu = [(r["cpu"] + r["db_cpu"]) / r["events"] * 1e6 for r in (ours, peer)]
    detail = f"{ratio:.2f}x (CPU per event, own and PostgreSQL's: {cpu[0]:.0f} vs {cpu[1]:.0f} us)"
    description = f"ours at least {MIN_RATIO:g}x Ponder's events/s"
    result.target(description, ratio, detail, at_least=MIN_RATIO)
    result.notes.append(
        f"\nOurs reads eth_getLogs over {SPAN} blocks and keeps events, deposits, holders, their "
        "tally and rank buckets; Ponder reads its own ranges and keeps events and holders. Own "
        "CPU: the indexer's process (ours in deposit_index, Ponder's since its backfill began); "
        "PostgreSQL: the backends serving its database; both from /proc/<pid>/stat."
    )
    others = ", ".join(f"{k} {u.other_cores:.2f}" for k, u in usages.items())
    result.notes.append(f"Other processes' cores during each run: {others}.")
    result.warn_busy(usages, "events/s figures are disturbed")
    if any(ours[k] != peer[k] for k in ("events", "holders", "balances")):
        result.failures.append(f"the two disagree: ours {ours}, Ponder {peer}")


def _ponder(ctx: Context, setup: dict, db_url: str, conn) -> dict:
    """Ponder from a fresh database until its log says its backfill is done: the CPU of its
    process and its backends since its backfill began, its counts from its tables."""
    dataset.create_database(db_url, recreate=True)
    (PONDER / "setup.json").write_text(json.dumps(setup))
    env = {**os.environ, "DATABASE_URL": db_url, "PONDER_TELEMETRY_DISABLED": "true"}
    env["PEERS_SETUP"] = str(PONDER / "setup.json")  # read by its config and its handlers
    name, seen, start = db_url.rsplit("/", 1)[1], {}, []  # seen: the backends' last ticks
    with Processes(ctx.log) as procs:
        proc, path = procs.start("ponder", PONDER_CMD, env), procs.dir / "ponder.log"

        def logged(message: str) -> dict | None:  # the first line of its log saying `message`
            lines = (json.loads(x) for x in path.read_text().splitlines() if x.startswith("{"))
            return next((x for x in lines if x.get("msg", "").startswith(message)), None)

        def backfilled() -> bool:
            seen.update(load.ticks(pid for (pid,) in conn.execute(BACKENDS, [name])))
            if not start and logged("Started backfill"):
                start[:] = load.ticks([proc.pid])[proc.pid], sum(seen.values())
            return logged("Completed backfill") is not None

        if not wait_until(backfilled, 1800, procs.dead):
            raise RuntimeError(f"Ponder did not complete its backfill:\n{procs.tail('ponder')}")
        own, done = load.ticks([proc.pid])[proc.pid], logged("Completed backfill")
    with dataset.connect(db_url) as db:
        n, holders, balances = db.execute(
            "SELECT (SELECT count(*) FROM peers.event), count(*), coalesce(sum(balance), 0)"
            " FROM peers.holder WHERE balance > 0"
        ).fetchone()
    out = {"events": n, "holders": holders, "balances": int(balances)}
    out |= {"seconds": done["duration"] / 1000, "cpu": (own - start[0]) / load.TICK}
    return out | {"db_cpu": (sum(seen.values()) - start[1]) / load.TICK}
