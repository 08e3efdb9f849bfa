"""Section `peers`: the event indexer beside a peer, Ponder 0.16.10, over the ~100,000 mixed events
of `activity` on one anvil, each into a fresh database of the same PostgreSQL: both rates, their
ratio, and the CPU per event of each indexer's process and of the PostgreSQL backends serving its
database. Ponder is installed into var/peers/ponder from bench/peers/ (never a dependency of the
project); the chain is mined FINALITY blocks past the events so that its backfill covers them
all, and its rate is over its backfill (its log's duration). Ours is `deposit_index`, run first
by `python -m bench.sections.peers RPC_URL MANIFEST` in its own process."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import bench
from bench import REPO, dataset, load
from bench.activity_chain import SPAN, generate, lat_emitters
from bench.context import QUIET_CORES, Context, Processes, SectionResult, wait_until
from bench.sections.activity import CHAIN_EVENTS

TITLE = "The event indexer beside Ponder on the same chain and PostgreSQL"
MIN_RATIO = 4.0
FINALITY = 32  # Ponder backfills up to head - 30 on a chain it does not know
PONDER = REPO / "var" / "peers" / "ponder"
PONDER_CMD = ["node", str(PONDER / "node_modules/ponder/dist/esm/bin/ponder.js")]
PONDER_CMD += ["--root", str(PONDER), "--log-format", "json", "start", "--schema", "peers"]
PONDER_CMD += ["-H", "127.0.0.1", "-p", "0"]


def backends(cursor, name: str) -> list[int]:
    """The pids of the PostgreSQL backends serving the databases whose name starts with `name`."""
    cursor.execute("SELECT pid FROM pg_stat_activity WHERE datname LIKE %s", [name + "%"])
    return [pid for (pid,) in cursor.fetchall()]


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

        def pids() -> dict[str, list[int]]:  # the bench's processes and backends
            return {"bench": load.children_of(os.getpid())[1:] + backends(conn.cursor(), base)}

        def measured(label: str, fn):  # after a quiet wait; others' CPU during it in `usages`
            load.wait_quiet(pids, max_other_cores=QUIET_CORES, timeout=ctx.args.quiet_wait)
            with load.CpuMonitor(pids) as monitor:
                out = fn()
            usages[label] = usage = monitor.usage  # the backends, gone by its end, are not others
            usage.others = max(0.0, usage.others - out["db_cpu"])
            return out

        ours = measured("ours", lambda: ctx.probe("bench.sections.peers", rpc, manifest, db_url))
        setup = {**ours["setup"], "rpc": rpc, "endBlock": last}
        ponder_url = dataset.with_database(db_url, ctx.db_name("peers_ponder"))
        peer = measured("Ponder", lambda: _ponder(ctx, setup, ponder_url, conn))
    _report(result, ours, peer)
    others = ", ".join(f"{k} {u.other_cores:.2f}" for k, u in usages.items())
    result.notes.append(f"Other processes' cores during each run: {others}.")
    result.warn_busy(usages, "events/s figures are disturbed")


def _ponder(ctx: Context, setup: dict, db_url: str, conn) -> dict:
    """Ponder from a fresh database until its log says its backfill is done: the CPU of its
    process and its backends since its backfill began, its counts from its tables."""
    dataset.create_database(db_url, recreate=True)
    (PONDER / "setup.json").write_text(json.dumps(setup))
    env = {**os.environ, "DATABASE_URL": db_url, "PONDER_TELEMETRY_DISABLED": "true"}
    env["PEERS_SETUP"] = str(PONDER / "setup.json")  # read by its config and its handlers
    name, seen, start = dataset.database_name(db_url), {}, [0, 0]  # seen: backends' last ticks
    with Processes(ctx.log) as procs:
        proc, path = procs.start("ponder", PONDER_CMD, env), procs.dir / "ponder.log"

        def backfilled() -> bool:
            seen.update(load.ticks(backends(conn.cursor(), name)))
            if start == [0, 0] and _logged(path, "Started backfill"):
                start[:] = load.ticks([proc.pid])[proc.pid], sum(seen.values())
            return _logged(path, "Completed backfill") is not None

        if not wait_until(backfilled, 1800, procs.dead):
            raise RuntimeError(f"Ponder did not complete its backfill:\n{procs.tail('ponder')}")
        own, done = load.ticks([proc.pid])[proc.pid], _logged(path, "Completed backfill")
    with dataset.connect(db_url) as db:
        n, holders, balances = db.execute(
            "SELECT (SELECT count(*) FROM peers.event), count(*), coalesce(sum(balance), 0)"
            " FROM peers.holder WHERE balance > 0"
        ).fetchone()
    out = {"events": n, "holders": holders, "balances": str(balances)}
    out |= {"seconds": done["duration"] / 1000, "cpu": (own - start[0]) / load.TICK}
    return out | {"db_cpu": (sum(seen.values()) - start[1]) / load.TICK}


def _logged(path: Path, message: str) -> dict | None:
    """The first line of Ponder's JSON log whose message starts with `message`."""
    lines = (json.loads(x) for x in path.read_text().splitlines() if x.startswith("{"))
    return next((line for line in lines if line.get("msg", "").startswith(message)), None)


def _report(result: SectionResult, ours: dict, peer: dict) -> None:
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
    if any(ours[k] != peer[k] for k in ("events", "holders", "balances")):
        result.failures.append(f"the two disagree: ours {ours}, Ponder {peer}")


def probe(rpc: str, manifest_path: str) -> dict:
    """Our side: the LAT imported, then deposit_index from empty tables, timed, with the CPU of
    this process and of the database's backends; and Ponder's setup (the same contracts)."""
    import django

    django.setup()
    from django.db import connection
    from django.db.models import Sum

    from activity.indexer import deposit_index
    from chain.abi import ABI_DIR
    from chain.activity import ACTIVITY_EVENTS
    from deposits.models import Event, Holder
    from lats.manifests import lat_import_manifests, manifest_parse

    manifest = manifest_parse(json.loads(Path(manifest_path).read_text()), source=manifest_path)
    (lat,) = lat_import_manifests(manifests=[manifest])
    name = connection.settings_dict["NAME"]
    db0 = load.ticks(backends(connection.cursor(), name))
    cpu0, began = time.process_time(), time.perf_counter()
    deposit_index(lat=lat, max_range=SPAN)
    seconds, cpu = time.perf_counter() - began, time.process_time() - cpu0
    db = load.ticks(backends(connection.cursor(), name))
    # Each ABI's addresses (Ponder takes a list): the proxies, the staker nodes, the beacon.
    holders, contracts = Holder.objects.filter(lat=lat, balance__gt=0), lat_emitters(rpc, lat)
    abi = {n: json.loads((ABI_DIR / f"{n}.json").read_text()) for n in contracts}
    setup = {"chainId": lat.chain_id, "startBlock": lat.deployment_block, "table": ACTIVITY_EVENTS}
    setup["contracts"] = {n: [a, abi[n]] for n, a in contracts.items()}
    out = {"events": Event.objects.filter(lat=lat).count(), "seconds": seconds, "cpu": cpu}
    out["db_cpu"] = sum(t - db0.get(pid, 0) for pid, t in db.items()) / load.TICK
    out |= {"holders": holders.count(), "balances": str(holders.aggregate(s=Sum("balance"))["s"])}
    return out | {"setup": setup}


if __name__ == "__main__":  # our side: python -m bench.sections.peers RPC_URL MANIFEST
    print(json.dumps(probe(*sys.argv[1:3])))
