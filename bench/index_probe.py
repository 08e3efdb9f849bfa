"""Run by bench/sections/indexing.py in its own process (Django on the indexing database).

Times, over the same LAT and block ranges: (1) the ceiling, plain `eth_getLogs` plus ABI
decoding with no database; (2) the service's indexer, `deposit_index`, from an empty table.
Prints one JSON object.

    python bench/index_probe.py --rpc URL --manifest FILE [--range N]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import requests
from eth_abi import decode as abi_decode
from eth_utils import keccak, to_checksum_address

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def ceiling(rpc: str, lat: str, start: int, head: int, span: int) -> tuple[int, float]:
    """eth_getLogs over the ranges + ABI decoding of every event; no database."""
    topics = [
        [
            "0x" + keccak(text="AssetDeposited(address,address,address,uint256,uint256)").hex(),
            "0x" + keccak(text="Deposit(address,address,address,uint256,uint256)").hex(),
        ]
    ]
    session = requests.Session()
    decoded = 0
    began = time.perf_counter()
    block = start
    while block <= head:
        end = min(block + span - 1, head)
        response = session.post(
            rpc,
            json={
                "jsonrpc": "2.0",
                "id": 1,
                "method": "eth_getLogs",
                "params": [
                    {"address": lat, "topics": topics, "fromBlock": hex(block), "toBlock": hex(end)}
                ],
            },
            timeout=300,
        ).json()
        for log in response["result"]:
            parties = [
                to_checksum_address(abi_decode(["address"], bytes.fromhex(t[2:]))[0])
                for t in log["topics"][1:4]
            ]
            values = abi_decode(["uint256", "uint256"], bytes.fromhex(log["data"][2:]))
            decoded += len(parties) == 3 and len(values) == 2
        block = end + 1
    return decoded, time.perf_counter() - began


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rpc", required=True)
    parser.add_argument("--manifest", required=True)
    parser.add_argument("--range", type=int, default=5000)
    args = parser.parse_args()

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "latsite.settings")
    os.environ["RPC_URL"] = args.rpc
    import django

    django.setup()
    from django.conf import settings

    from deposits.models import Deposit
    from deposits.services import deposit_index
    from lats.chain.gateway import gateway_for_url
    from lats.services import lat_import_manifests, manifest_parse

    settings.RPC_URL = args.rpc
    manifest = manifest_parse(json.loads(Path(args.manifest).read_text()), source=args.manifest)
    (lat,) = lat_import_manifests(manifests=[manifest])
    Deposit.objects.filter(lat=lat).delete()
    head = gateway_for_url(args.rpc, timeout=300).head().number

    results = {"ceiling": [], "indexer": []}
    for _ in range(2):
        events, seconds = ceiling(
            args.rpc, lat.proxy_address, lat.deployment_block, head, args.range
        )
        results["ceiling"].append({"events": events, "seconds": seconds})
    for _ in range(2):
        from deposits.models import DepositCheckpoint

        Deposit.objects.all().delete()
        DepositCheckpoint.objects.all().delete()
        began = time.perf_counter()
        summary = deposit_index(lat=lat, max_range=args.range)
        seconds = time.perf_counter() - began
        stored = Deposit.objects.filter(lat=lat).count()
        results["indexer"].append({"events": stored, "new": summary.new, "seconds": seconds})
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
