"""Section `peers`: the event indexer beside a peer, Ponder 0.16.10, over the same ~100,000 mixed
events of the `activity` section on one anvil, each into a fresh database of the same PostgreSQL:
both rates, their ratio, and the CPU per event of each indexer's process and of the PostgreSQL
backends serving its database (utime + stime from /proc/<pid>/stat, sampled by pid).

Ponder is installed by the section into var/peers/ponder (never a dependency of the project) from
bench/peers/: a schema of the same events and balances, its own handlers, no RPC cache. The chain
is mined FINALITY blocks past the events, so that Ponder's backfill covers all of them; its rate
is over its backfill (its log's duration, start-up excluded), ours over `deposit_index`.
`python -m bench.sections.peers RPC_URL MANIFEST` is our side, run in its own process.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import PYTHON, REPO, dataset
from bench.activity_chain import SPAN, generate
from bench.context import Context, SectionResult, Target
from bench.load import TICK, _stat
from bench.sections.activity import CHAIN_EVENTS

TITLE = "The event indexer beside Ponder on the same chain and PostgreSQL"
MIN_RATIO = 4.0
FINALITY = 32  # Ponder backfills up to head - 30 on a chain it does not know
PONDER = REPO / "var" / "peers" / "ponder"
FILES = ("package.json", "ponder.config.ts", "ponder.schema.ts", "src/index.ts", "src/api/index.ts")
COLUMNS = ["indexer", "events", "seconds", "events/s", "own CPU us/event", "PostgreSQL us/event"]
BACKENDS = "SELECT pid FROM pg_stat_activity WHERE datname = %s"


def ticks(pids) -> dict[int, int]:
    return {pid: sum(int(x) for x in _stat(pid)[11:13]) for pid in pids}  # utime + stime


def run(ctx: Context, result: SectionResult) -> None:
    base = ctx.args.db_name.removesuffix("_bench")
    _install(ctx)
    with ctx.devnet(f"{base}_peers_bench") as (rpc_url, manifest, db_url):
        ctx.log(f"peers: emitting {CHAIN_EVENTS:,} events")
        generate(rpc_url, manifest, CHAIN_EVENTS)
        last = int(_rpc(rpc_url, "eth_blockNumber"), 16)  # the events' last block
        _rpc(rpc_url, "anvil_mine", hex(FINALITY))
        with tempfile.NamedTemporaryFile("w", suffix=".json") as file:
            json.dump(manifest, file)
            file.flush()
            ctx.log("peers: our indexer")
            cmd = [PYTHON, "-m", "bench.sections.peers", rpc_url, file.name]
            env = {**ctx.env, "DATABASE_URL": db_url, "RPC_URL": rpc_url, "LOG_LEVEL": "WARNING"}
            out = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
        if out.returncode:
            return result.failures.append(f"our indexer failed: {out.stderr[-2000:]}")
        ours = json.loads(out.stdout.splitlines()[-1])
        ctx.log("peers: Ponder")
        ponder_url = dataset.with_database(db_url, f"{base}_peers_ponder_bench")
        peer = _ponder({**ours, "rpc": rpc_url, "endBlock": last}, ponder_url, db_url)
    _report(result, ours, peer)


def _install(ctx: Context) -> None:
    """bench/peers/ copied into var/peers/ponder, and npm install there when package.json
    changed."""
    template, marker = REPO / "bench" / "peers", PONDER / "node_modules" / ".bench-installed"
    for name in FILES:
        (PONDER / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(template / name, PONDER / name)
    wanted = (template / "package.json").read_text()
    if not marker.exists() or marker.read_text() != wanted:
        ctx.log(f"peers: npm install in {PONDER}")
        npm = ["npm", "install", "--no-audit", "--no-fund", "--loglevel=error"]
        subprocess.run(npm, cwd=PONDER, check=True)
        marker.write_text(wanted)


def _rpc(url: str, method: str, *params):
    import requests

    return requests.post(
        url, json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params}, timeout=60
    ).json()["result"]


def _ponder(ours: dict, db_url: str, ours_url: str) -> dict:
    """Ponder over our side's blocks and contracts, run until its log says the backfill is
    done, then stopped; its counts read from its tables."""
    dataset.create_database(db_url, recreate=True)
    keys = ("chainId", "contracts", "startBlock", "endBlock", "table", "rpc")
    (PONDER / "setup.json").write_text(json.dumps({k: ours[k] for k in keys}))
    bin_ = PONDER / "node_modules" / "ponder" / "dist" / "esm" / "bin" / "ponder.js"
    cmd = ["node", str(bin_), "start", "--schema", "peers", "-H", "127.0.0.1", "-p", "0"]
    cmd += ["--log-format", "json"]
    env = {**os.environ, "DATABASE_URL": db_url, "PONDER_TELEMETRY_DISABLED": "true"}
    log_path, name = PONDER / "ponder.log", dataset.database_name(db_url)
    with open(log_path, "w") as log, dataset.connect(ours_url, autocommit=True) as conn:
        proc = subprocess.Popen(cmd, cwd=PONDER, env=env, stdout=log, stderr=subprocess.STDOUT)
        seen: dict[int, int] = {}  # the latest ticks of each backend of Ponder's database
        start, deadline = None, time.monotonic() + 1800
        try:
            while (done := _logged(log_path, "Completed backfill indexing")) is None:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"Ponder stopped or stalled: {log_path.read_text()[-2000:]}")
                seen |= ticks(pid for (pid,) in conn.execute(BACKENDS, [name]))
                if start is None and _logged(log_path, "Started backfill indexing"):
                    start = (ticks([proc.pid])[proc.pid], sum(seen.values()))
                time.sleep(0.2)
            seen |= ticks(pid for (pid,) in conn.execute(BACKENDS, [name]))
            cpu = ticks([proc.pid])[proc.pid]
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    with dataset.connect(db_url) as conn:
        counts = conn.execute(
            "SELECT (SELECT count(*) FROM peers.event), count(*), coalesce(sum(balance), 0)"
            " FROM peers.holder WHERE balance > 0"
        ).fetchone()
    start = start or (0, 0)
    return {
        "events": counts[0], "holders": counts[1], "balances": str(counts[2]),
        "seconds": done["duration"] / 1000, "cpu": (cpu - start[0]) / TICK,
        "db_cpu": (sum(seen.values()) - start[1]) / TICK,
    }  # fmt: skip


def _logged(path: Path, message: str) -> dict | None:
    """The first JSON line of Ponder's log whose message starts with `message`."""
    for line in path.read_text().splitlines():
        if line.startswith("{") and json.loads(line).get("msg", "").startswith(message):
            return json.loads(line)
    return None


def _report(result: SectionResult, ours: dict, peer: dict) -> None:
    result.columns = COLUMNS
    for label, r in (("ours: deposit_index", ours), ("Ponder 0.16.10", peer)):
        per = [f"{r[k] / r['events'] * 1e6:,.0f}" for k in ("cpu", "db_cpu")]
        rate = f"{r['events'] / r['seconds']:,.0f}"
        result.rows.append([label, f"{r['events']:,}", f"{r['seconds']:.2f}", rate, *per])
    ratio = (ours["events"] / ours["seconds"]) / (peer["events"] / peer["seconds"])
    result.targets.append(
        Target(
            f"ours at least {MIN_RATIO:g}x Ponder's events/s", ratio >= MIN_RATIO, f"{ratio:.2f}x"
        )
    )
    result.notes.append(
        f"\nours: eth_getLogs over {SPAN} blocks, events, deposits, holders, tally and buckets; "
        "Ponder: its own ranges, events and holders. CPU: the indexer's process (ours: in "
        "deposit_index; Ponder: from its backfill's start) and the PostgreSQL backends serving "
        "its database, from /proc/<pid>/stat."
    )
    keys = ("events", "holders", "balances")
    if any(ours[k] != peer[k] for k in keys) or ours["events"] < CHAIN_EVENTS:
        result.failures.append(f"the two disagree: ours {ours}, Ponder {peer}")


def probe(rpc: str, manifest_path: str) -> dict:
    """Our side: the LAT imported, then deposit_index from empty tables, timed, with the CPU of
    this process and of the database's backends."""
    import django

    django.setup()
    from django.db import connection
    from django.db.models import Sum

    from deposits.models import Event, Holder
    from deposits.services import deposit_index
    from lats.chain.abi import ABI_DIR
    from lats.chain.activity import ACTIVITY_EVENTS
    from lats.manifests import lat_import_manifests, manifest_parse

    manifest = manifest_parse(json.loads(Path(manifest_path).read_text()), source=manifest_path)
    (lat,) = lat_import_manifests(manifests=[manifest])

    def backends() -> dict[int, int]:
        with connection.cursor() as cur:
            cur.execute(BACKENDS, [connection.settings_dict["NAME"]])
            return ticks(pid for (pid,) in cur.fetchall())

    db0, cpu0, began = backends(), time.process_time(), time.perf_counter()
    deposit_index(lat=lat, max_range=SPAN)
    seconds, cpu, db = time.perf_counter() - began, time.process_time() - cpu0, backends()
    holders = Holder.objects.filter(lat=lat, balance__gt=0)
    contracts = {"LiquidToken": lat.proxy_address}
    for name in ("LiquidTokenManager", "StakerNodeCoordinator"):
        contracts[name] = lat.proxy_of(name[0].lower() + name[1:])
    abis = {n: json.loads((ABI_DIR / f"{n}.json").read_text()) for n in contracts}
    wanted = {(c, e) for c, e, _ in ACTIVITY_EVENTS}
    return {
        "events": Event.objects.filter(lat=lat).count(), "seconds": seconds, "cpu": cpu,
        "db_cpu": sum(t - db0.get(pid, 0) for pid, t in db.items()) / TICK,
        "holders": holders.count(), "balances": str(holders.aggregate(s=Sum("balance"))["s"]),
        "chainId": lat.chain_id, "startBlock": lat.deployment_block, "table": ACTIVITY_EVENTS,
        "contracts": {
            n: [a, [e for e in abis[n] if e["type"] == "event" and (n, e["name"]) in wanted]]
            for n, a in contracts.items()
        },
    }  # fmt: skip


if __name__ == "__main__":  # our side: python -m bench.sections.peers RPC_URL MANIFEST
    print(json.dumps(probe(*sys.argv[1:3])))
