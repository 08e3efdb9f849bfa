"""About 100,000 mixed events of one LAT on anvil, emitted quickly, and the probe that times the
service's event indexer beside plain `eth_getLogs` (`python -m bench.activity_chain RPC_URL
MANIFEST SPAN [decoded]`, run in its own process with Django on the section's database).

One transaction of bench/contracts/ActivityBatch.sol makes DEPOSITS deposits to holders of a
pool of POOL addresses (a mint `Transfer` and an `AssetDeposited` each), one to the helper,
TRANSFERS transfers and BURNS burns of the helper's LAT: PER_TX events. Every ADMIN_EVERY
transactions the owner pauses and unpauses the LAT, sets a price and delegates (then
undelegates) a staker node."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import bench

CONTRACT = Path(__file__).with_name("contracts") / "ActivityBatch.sol"
POOL = 20_000
DEPOSITS, TRANSFERS, BURNS = 100, 180, 18  # per transaction
PER_TX = 2 * DEPOSITS + 2 + TRANSFERS + BURNS  # 400
ADMIN_EVERY = 10
SPAN = 20  # blocks per eth_getLogs / indexing step: ~7,000 logs


def generate(rpc_url: str, manifest: dict, events: int) -> int:
    """At least `events` events of the LAT: the number of transactions sent."""
    from web3 import Web3

    from devchain.compile import compile_files
    from devchain.devnet import BENCH_SENDER, DEPLOYER, OPERATORS, connect, contract

    w3 = connect(rpc_url, timeout=300)
    accounts = [Web3.to_checksum_address(a) for a in w3.eth.accounts]
    sender, asset, lat = accounts[BENCH_SENDER], manifest["tokens"][0]["address"], None
    built = compile_files([CONTRACT])["ActivityBatch"]
    factory = w3.eth.contract(abi=built["abi"], bytecode=built["bytecode"])
    deployed = factory.constructor(manifest["proxyAddress"], asset).transact({"from": sender})
    helper = w3.eth.contract(address=_wait(w3, deployed)["contractAddress"], abi=built["abi"])
    token = contract(w3, "TestERC20", asset).functions
    batches, one = -(-events // PER_TX), 10 ** token.decimals().call()
    minted = one * (DEPOSITS + TRANSFERS + BURNS + 1) * batches
    _wait(w3, token.mint(helper.address, minted).transact({"from": sender}))
    lat = contract(w3, "LiquidToken", manifest["proxyAddress"]).functions
    proxies = manifest["contractDeployments"]["proxy"]
    manager = contract(w3, "LiquidTokenManager", proxies["liquidTokenManager"]["address"])
    price, operator = manager.functions.getTokenInfo(asset).call()[1], accounts[OPERATORS[0]]
    admin = [  # node 2 is undelegated in the devnet's latETH
        lambda b: lat.pause(),
        lambda b: lat.unpause(),
        lambda b: manager.functions.updatePrice(asset, price + (b // ADMIN_EVERY) % 2),
        lambda b: manager.functions.delegateNodes([2], [operator], [(b"", 0)], [bytes(32)]),
        lambda b: manager.functions.undelegateNodes([2]),
    ]
    hashes, owner = [], {"from": accounts[DEPLOYER], "gas": 1_000_000}
    for batch in range(batches):
        hashes += [call(batch).transact(owner) for call in admin if batch % ADMIN_EVERY == 0]
        run = helper.functions.run(batch, POOL, one, DEPOSITS, TRANSFERS, BURNS)
        hashes.append(run.transact({"from": sender, "gas": 40_000_000}))
    _wait(w3, hashes[-1])
    with w3.batch_requests() as batch:
        for tx_hash in hashes:
            batch.add(w3.eth.get_transaction_receipt(tx_hash))
        if failed := [r for r in batch.execute() if r["status"] != 1]:
            raise RuntimeError(f"{len(failed)} transactions reverted")
    return len(hashes)


def _wait(w3, tx_hash):
    receipt = w3.eth.wait_for_transaction_receipt(tx_hash, timeout=120, poll_latency=0.01)
    if receipt["status"] != 1:
        raise RuntimeError(f"transaction {tx_hash.hex()} reverted")
    return receipt


def lat_contracts(lat) -> dict[str, str]:
    """The LAT's proxies the indexer reads, by contract name."""
    names = ("LiquidTokenManager", "StakerNodeCoordinator", "TokenRegistryOracle")
    proxies = lat.contract_deployments.get("proxy", {})
    return {
        "LiquidToken": lat.proxy_address,
        **{n: proxies[key] for n in names if (key := n[0].lower() + n[1:]) in proxies},
    }


def lat_emitters(rpc: str, lat) -> dict[str, list[str]]:
    """Every address whose events the indexer reads for the LAT, by ABI name: its proxies,
    its staker nodes and the node beacon (read from the coordinator at the head)."""
    from chain.abi import function
    from chain.gateway import gateway_for_url

    gateway = gateway_for_url(rpc, timeout=300)
    head = gateway.head().number
    proxies = lat_contracts(lat)
    coordinator = proxies["StakerNodeCoordinator"]
    all_nodes = function("StakerNodeCoordinator", "getAllNodes")
    (nodes,) = all_nodes.decode(gateway.call(coordinator, all_nodes.encode(), block=head))
    beacon = gateway.node_beacon(coordinator, block=head)
    return {
        **{name: [address] for name, address in proxies.items()},
        "StakerNode": list(nodes),
        "TransparentUpgradeableProxy": [*proxies.values(), *([beacon] if beacon else [])],
    }


def logs_ceiling(rpc: str, addresses: list[str], start: int, head: int, decode, span: int):
    """eth_getLogs of the LAT's contracts (`addresses`) and the feed's topics over ranges of
    `span` blocks (as the indexer asks), the JSON parsed (each log decoded with `decode`):
    events and seconds."""
    import requests

    from chain.activity import activity_topics

    session, logs, began = requests.Session(), 0, time.perf_counter()
    query = {"address": addresses, "topics": [activity_topics()]}
    for block in range(start, head + 1, span):
        query |= {"fromBlock": hex(block), "toBlock": hex(min(block + span - 1, head))}
        result = bench.rpc(rpc, "eth_getLogs", query, session=session)
        logs += sum(decode(log) is not None for log in result) if decode else len(result)
    return {"events": logs, "seconds": time.perf_counter() - began}


def probe(rpc: str, manifest_path: str, span: str, decoded: str = "") -> dict:
    """The ceiling (and the service's decoder, with `decoded`) and the indexer, twice each over
    the same ranges, the LAT imported afresh before each indexer run; then the checks, and the
    LAT deleted (the database holds what it held before)."""
    import django

    django.setup()
    from django.db.models import Count, Sum

    from activity.indexer import deposit_index
    from chain.activity import activity_decoder
    from chain.gateway import gateway_for_url
    from deposits.models import Deposit, DepositCount, Event, Holder, HolderTally
    from lats.manifests import lat_import_manifests, manifest_parse

    manifest = manifest_parse(json.loads(Path(manifest_path).read_text()), source=manifest_path)
    (lat,) = lat_import_manifests(manifests=[manifest])
    head, emitters = gateway_for_url(rpc, timeout=300).head().number, lat_emitters(rpc, lat)
    nodes = {address: i for i, address in enumerate(emitters["StakerNode"])}
    proxies = lat_contracts(lat)
    upgradeable = emitters["TransparentUpgradeableProxy"]
    beacon = next((a for a in upgradeable if a not in proxies.values()), "")
    decoder = activity_decoder(proxies, nodes=nodes, beacon=beacon)
    addresses = list(dict.fromkeys(a for group in emitters.values() for a in group))
    out: dict = {"blocks": head - lat.deployment_block + 1, "indexer": []}
    decoders = {"ceiling": None} | ({"decoded": decoder} if decoded else {})
    for kind, decode in decoders.items():
        args = (rpc, addresses, lat.deployment_block, head, decode, int(span))
        out[kind] = [logs_ceiling(*args) for _ in range(2)]
    for _ in range(2):
        lat.delete()
        (lat,) = lat_import_manifests(manifests=[manifest])
        began = time.perf_counter()
        deposit_index(lat=lat, max_range=int(span))
        run = {"events": Event.objects.filter(lat=lat).count()}
        run |= {
            "seconds": time.perf_counter() - began,
            "deposits": Deposit.objects.filter(lat=lat).count(),
        }
        out["indexer"].append(run)
    holders, call = Holder.objects.filter(lat=lat, balance__gt=0), {"to": lat.proxy_address}
    out["check"] = {  # totalSupply() on chain against the stored balances and the tally
        "supply": int(bench.rpc(rpc, "eth_call", call | {"data": "0x18160ddd"}, "latest"), 16),
        "balances": int(holders.aggregate(s=Sum("balance"))["s"] or 0),
        "holders": holders.count(),
        "tally": HolderTally.objects.get(lat=lat).holders,
        "types": dict(Event.objects.filter(lat=lat).values_list("type").annotate(n=Count("id"))),
        "counts_ok": sum(DepositCount.objects.filter(field="").values_list("n", flat=True))
        == Deposit.objects.count(),
    }
    lat.delete()
    return out


if __name__ == "__main__":
    print(json.dumps(probe(*sys.argv[1:])))
