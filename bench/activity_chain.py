"""The `activity` section's chain part: about 100,000 mixed events of one LAT on anvil, emitted
quickly, and the probe that times the service's event indexer beside plain `eth_getLogs`.

The events come from bench/contracts/ActivityBatch.sol (compiled here with the project's
solcjs): one transaction makes DEPOSITS deposits to holders of a pool of POOL addresses (each a
mint `Transfer` and an `AssetDeposited`), one deposit to the helper itself, TRANSFERS transfers
of the helper's LAT to holders of the pool and BURNS burns of it: PER_TX events. Every ADMIN_EVERY
transactions the owner pauses and unpauses the LAT, updates a price and delegates (then
undelegates) a staker node. Anvil auto-mines a block per transaction.

`python -m bench.activity_chain RPC_URL MANIFEST` is the probe, run by the section in its own
process with Django on the section's database.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import bench

CONTRACT = Path(__file__).with_name("contracts") / "ActivityBatch.sol"
POOL = 20_000  # holder addresses the deposits and transfers draw from
DEPOSITS, TRANSFERS, BURNS = 100, 180, 18  # per transaction
PER_TX = 2 * DEPOSITS + 2 + TRANSFERS + BURNS  # events per transaction: 400
ADMIN_EVERY = 10  # transactions between two rounds of admin events
SPAN = 20  # blocks per eth_getLogs / indexing step: 2 admin rounds and ~16 batches, ~7,000 logs
TX_GAS = 40_000_000


def generate(rpc_url: str, manifest: dict, events: int) -> int:
    """Emit at least `events` events of the LAT (see the module's docstring); returns the
    number of transactions sent."""
    from web3 import Web3

    from devchain.devnet import BENCH_SENDER, DEPLOYER, connect, contract

    w3 = connect(rpc_url, timeout=300)
    accounts = [Web3.to_checksum_address(a) for a in w3.eth.accounts]
    sender, owner = accounts[BENCH_SENDER], accounts[DEPLOYER]
    asset = manifest["tokens"][0]["address"]
    helper = _deploy_helper(w3, manifest["proxyAddress"], asset, sender)
    one = 10 ** contract(w3, "TestERC20", asset).functions.decimals().call()
    batches, per_batch = -(-events // PER_TX), DEPOSITS + TRANSFERS + BURNS + 1
    mint = contract(w3, "TestERC20", asset).functions.mint(
        helper.address, one * per_batch * batches
    )
    _wait(w3, mint.transact({"from": sender}))
    admin = _admin_calls(w3, manifest, owner)
    hashes = []
    for batch in range(batches):
        if batch % ADMIN_EVERY == 0:
            hashes += [call(batch) for call in admin]
        run = helper.functions.run(batch, POOL, one, DEPOSITS, TRANSFERS, BURNS)
        hashes.append(run.transact({"from": sender, "gas": TX_GAS}))
    _check(w3, hashes)
    return len(hashes)


def _deploy_helper(w3, lat: str, asset: str, sender: str):
    """ActivityBatch, compiled as devchain's contracts are, deployed."""
    from devchain.compile import compile_files

    built = compile_files([CONTRACT])["ActivityBatch"]
    factory = w3.eth.contract(abi=built["abi"], bytecode=built["bytecode"])
    receipt = _wait(w3, factory.constructor(lat, asset).transact({"from": sender}))
    return w3.eth.contract(address=receipt["contractAddress"], abi=built["abi"])


def _wait(w3, tx_hash):
    from devchain.devnet import DevnetError

    receipt = w3.eth.wait_for_transaction_receipt(tx_hash, timeout=120, poll_latency=0.01)
    if receipt["status"] != 1:
        raise DevnetError(f"transaction {tx_hash.hex()} reverted")
    return receipt


def _admin_calls(w3, manifest: dict, owner: str) -> list:
    """One round of the owner's rarer events: Paused, Unpaused, TokenPriceUpdated,
    NodeDelegated (then NodeUndelegated, not in the feed), each a function of the round."""
    from devchain.devnet import OPERATORS, contract

    lt = contract(w3, "LiquidToken", manifest["proxyAddress"])
    manager_address = manifest["contractDeployments"]["proxy"]["liquidTokenManager"]["address"]
    manager = contract(w3, "LiquidTokenManager", manager_address)
    asset = manifest["tokens"][0]["address"]
    price = manager.functions.getTokenInfo(asset).call()[1]
    operator = w3.eth.accounts[OPERATORS[0]]
    tx = {"from": owner, "gas": 1_000_000}
    node = 2  # undelegated in the devnet's latETH
    return [
        lambda b: lt.functions.pause().transact(tx),
        lambda b: lt.functions.unpause().transact(tx),
        lambda b: manager.functions.updatePrice(asset, price + (b // ADMIN_EVERY) % 2).transact(tx),
        lambda b: manager.functions.delegateNodes(
            [node], [operator], [(b"", 0)], [bytes(32)]
        ).transact(tx),
        lambda b: manager.functions.undelegateNodes([node]).transact(tx),
    ]


def _check(w3, hashes: list) -> None:
    """Every transaction mined and succeeded."""
    _wait(w3, hashes[-1])
    with w3.batch_requests() as batch:
        for tx_hash in hashes:
            batch.add(w3.eth.get_transaction_receipt(tx_hash))
        receipts = batch.execute()
    failed = [h for h, r in zip(hashes, receipts, strict=True) if r["status"] != 1]
    if failed:
        raise RuntimeError(f"{len(failed)} transactions reverted, first {failed[0].hex()}")


# --- the probe (its own process, Django on the section's database) --------------------------


def logs_ceiling(
    rpc: str, contracts: dict[str, str], start: int, head: int, decode=None, span: int = SPAN
):
    """eth_getLogs of the LAT's three contracts and the feed's topics over ranges of `span`
    blocks (as the indexer asks), the JSON parsed; with `decode`, each log decoded too. No
    database."""
    import requests

    from chain.activity import activity_topics

    session, logs, began = requests.Session(), 0, time.perf_counter()
    query = {"address": list(contracts.values()), "topics": [activity_topics()]}
    for block in range(start, head + 1, span):
        query |= {"fromBlock": hex(block), "toBlock": hex(min(block + span - 1, head))}
        result = bench.rpc(rpc, "eth_getLogs", query, session=session)
        logs += sum(decode(log) is not None for log in result) if decode else len(result)
    return logs, time.perf_counter() - began


def lat_contracts(lat) -> dict[str, str]:
    """The LAT's three contracts the indexer reads, by contract name."""
    names = ("LiquidTokenManager", "StakerNodeCoordinator")
    return {
        "LiquidToken": lat.proxy_address,
        **{n: lat.proxy_of(n[0].lower() + n[1:]) for n in names},
    }


def _holders(rpc: str, lat) -> dict:
    """The stored holders against the chain: their balances sum to totalSupply, the tally
    counts them; the events stored by type and the listing's counts against the rows."""
    from django.db.models import Count, Sum

    from deposits.models import Deposit, DepositCount, Event, Holder, HolderTally

    call = {"to": lat.proxy_address, "data": "0x18160ddd"}  # totalSupply()
    holders = Holder.objects.filter(lat=lat, balance__gt=0)
    counted = DepositCount.objects.filter(field="").values_list("n", flat=True)
    return {
        "supply": int(bench.rpc(rpc, "eth_call", call, "latest"), 16),
        "balances": int(holders.aggregate(s=Sum("balance"))["s"] or 0),
        "holders": holders.count(),
        "tally": HolderTally.objects.get(lat=lat).holders,
        "types": dict(Event.objects.filter(lat=lat).values_list("type").annotate(n=Count("id"))),
        "counts_ok": sum(counted) == Deposit.objects.count(),
    }


def probe(rpc: str, manifest_path: str, span: str, decoded: str = "") -> dict:
    """The ceiling (with `decoded`, the service's decoder too) and the service's indexer, each
    twice over the same LAT and `span`-block ranges, the LAT imported afresh before each
    indexer run (so from empty tables, whatever else the database holds); then the checks, and
    the LAT deleted (the database holds what it held before)."""
    import django

    django.setup()
    from activity.indexer import deposit_index
    from chain.activity import activity_decoder
    from chain.gateway import gateway_for_url
    from deposits.models import Deposit, Event
    from lats.manifests import lat_import_manifests, manifest_parse

    manifest = manifest_parse(json.loads(Path(manifest_path).read_text()), source=manifest_path)
    (lat,) = lat_import_manifests(manifests=[manifest])
    head, contracts = gateway_for_url(rpc, timeout=300).head().number, lat_contracts(lat)
    out: dict = {"blocks": head - lat.deployment_block + 1, "indexer": []}
    decoders = {"ceiling": None, **({"decoded": activity_decoder(contracts)} if decoded else {})}
    for kind, decode in decoders.items():
        runs = [
            logs_ceiling(rpc, contracts, lat.deployment_block, head, decode, int(span))
            for _ in range(2)
        ]
        out[kind] = [{"events": logs, "seconds": seconds} for logs, seconds in runs]
    for _ in range(2):
        lat.delete()
        (lat,) = lat_import_manifests(manifests=[manifest])
        began = time.perf_counter()
        deposit_index(lat=lat, max_range=int(span))
        seconds = time.perf_counter() - began
        stored = {"events": Event.objects.filter(lat=lat).count(), "seconds": seconds}
        out["indexer"].append({**stored, "deposits": Deposit.objects.filter(lat=lat).count()})
    out["check"] = _holders(rpc, lat)
    lat.delete()
    return out


# The probe: python -m bench.activity_chain RPC_URL MANIFEST SPAN [decoded]
if __name__ == "__main__":
    print(json.dumps(probe(*sys.argv[1:])))
