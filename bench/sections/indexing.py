"""Section `indexing`: deposits indexed per second (`deposit_index` into a fresh database) beside
the ceiling of the same work without a database (plain `eth_getLogs` + ABI decoding).

On an anvil with the devnet and EVENTS `AssetDeposited` events on latETH (about a minute per
100,000), this module runs again as a script, in its own process with Django on the section's
database (`lat_indexing_bench`), to time both twice.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import PYTHON, REPO
from bench.context import Context, SectionResult, Target

TITLE = "Deposit indexing on anvil (events per second)"
MIN_RATIO = 0.50
BENCH_DB = "lat_indexing_bench"  # recreated every run
EVENTS = 100_000
SPAN = 5000  # blocks per eth_getLogs / indexing step
COLUMNS = ["measure", "events", "seconds (best of 2)", "events/s", "vs ceiling"]


def run(ctx: Context, result: SectionResult) -> None:
    from devchain.devnet import deposit_many

    result.columns = COLUMNS
    ctx.log(f"indexing: deploying the devnet and emitting {EVENTS} deposit events…")
    began = time.perf_counter()
    with ctx.devnet(BENCH_DB) as (rpc_url, manifest, db_url):
        deposit_many(rpc_url, manifest, EVENTS, per_tx=100)
        ctx.log(f"indexing: chain and database ready in {time.perf_counter() - began:.0f} s")
        with tempfile.NamedTemporaryFile("w", suffix=".json") as manifest_file:
            json.dump(manifest, manifest_file)
            manifest_file.flush()
            cmd = [PYTHON, "-m", "bench.sections.indexing", rpc_url, manifest_file.name]
            env = {**ctx.env, "DATABASE_URL": db_url, "RPC_URL": rpc_url, "RPC_TIMEOUT": "300"}
            env["LOG_LEVEL"] = "WARNING"
            probe = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
    if probe.returncode != 0:
        result.failures.append(f"indexing probe failed: {probe.stderr[-2000:]}")
        return
    _report(result, json.loads(probe.stdout.strip().splitlines()[-1]))


def _report(result: SectionResult, figures: dict[str, list[dict]]) -> None:
    ceiling = min(figures["ceiling"], key=lambda r: r["seconds"])
    indexer = min(figures["indexer"], key=lambda r: r["seconds"])
    if indexer["events"] != ceiling["events"] or indexer["events"] < EVENTS:
        result.failures.append(
            f"indexer stored {indexer['events']} deposits; the chain has {ceiling['events']}"
        )
    ratio = (indexer["events"] / indexer["seconds"]) / (ceiling["events"] / ceiling["seconds"])
    for name, best, vs in (
        ("eth_getLogs + ABI decode (ceiling)", ceiling, "1.00"),
        ("deposit_index (service)", indexer, f"{ratio:.2f}"),
    ):
        rate = f"{best['events'] / best['seconds']:,.0f}"
        result.rows.append([name, str(best["events"]), f"{best['seconds']:.2f}", rate, vs])
    result.targets.append(
        Target(
            f"indexer at least {MIN_RATIO:.0%} of the ceiling", ratio >= MIN_RATIO, f"{ratio:.0%}"
        )
    )
    runs = {kind: ", ".join(f"{r['seconds']:.2f}s" for r in figures[kind]) for kind in figures}
    result.notes.append(
        f"block range {SPAN}; runs: ceiling {runs['ceiling']}; indexer {runs['indexer']}"
    )


def _ceiling(rpc: str, lat: str, start: int, head: int) -> tuple[int, float]:
    """eth_getLogs over the ranges + ABI decoding of every event; no database."""
    import requests
    from eth_abi import decode as abi_decode
    from eth_utils import keccak, to_checksum_address

    signatures = ("AssetDeposited", "Deposit")
    topics = [
        [
            "0x" + keccak(text=f"{s}(address,address,address,uint256,uint256)").hex()
            for s in signatures
        ]
    ]
    session, decoded, began = requests.Session(), 0, time.perf_counter()
    for block in range(start, head + 1, SPAN):
        span = {
            "address": lat,
            "topics": topics,
            "fromBlock": hex(block),
            "toBlock": hex(min(block + SPAN - 1, head)),
        }
        body = {"jsonrpc": "2.0", "id": 1, "method": "eth_getLogs", "params": [span]}
        for log in session.post(rpc, json=body, timeout=300).json()["result"]:
            parties = [
                to_checksum_address(abi_decode(["address"], bytes.fromhex(t[2:]))[0])
                for t in log["topics"][1:4]
            ]
            values = abi_decode(["uint256", "uint256"], bytes.fromhex(log["data"][2:]))
            decoded += len(parties) == 3 and len(values) == 2
    return decoded, time.perf_counter() - began


def probe(rpc: str, manifest_path: str) -> dict[str, list[dict]]:
    """In the probe's process, Django on the indexing database: the ceiling and the service's
    indexer (from an empty table) over the same LAT and block ranges, twice each."""
    import django

    django.setup()
    from deposits.models import Deposit, DepositCheckpoint
    from deposits.services import deposit_index
    from lats.chain.gateway import gateway_for_url
    from lats.manifests import lat_import_manifests, manifest_parse

    manifest = manifest_parse(json.loads(Path(manifest_path).read_text()), source=manifest_path)
    (lat,) = lat_import_manifests(manifests=[manifest])
    head = gateway_for_url(rpc, timeout=300).head().number
    results: dict[str, list[dict]] = {"ceiling": [], "indexer": []}
    for _ in range(2):
        events, seconds = _ceiling(rpc, lat.proxy_address, lat.deployment_block, head)
        results["ceiling"].append({"events": events, "seconds": seconds})
    for _ in range(2):
        Deposit.objects.all().delete()
        DepositCheckpoint.objects.all().delete()
        began = time.perf_counter()
        summary = deposit_index(lat=lat, max_range=SPAN)
        seconds = time.perf_counter() - began
        stored = Deposit.objects.filter(lat=lat).count()
        results["indexer"].append({"events": stored, "new": summary.new, "seconds": seconds})
    return results


if __name__ == "__main__":  # the probe: python -m bench.sections.indexing RPC_URL MANIFEST
    print(json.dumps(probe(*sys.argv[1:3])))
