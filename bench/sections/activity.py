"""Section `activity`: the holders and events pages beside the baseline as in `api` (30%, deep
p50 within 2x); the event indexer's rate over ~100,000 events on anvil (`peers` judges it), by
the probe that `indexing` and `peers` share too (`python -m bench.sections.activity RPC_URL
MANIFEST SPAN RUNS [KIND...]`)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import bench
from bench import REPO, dataset, load
from bench.context import Context, SectionResult, table
from bench.sections.api import pages, report

TITLE = "Holders and events endpoints under load; the event indexer on anvil"
DEEP_SHARE = 0.99  # the deep cursor: this far into the feed, newest first
CHAIN_EVENTS = 100_000
PAIRS = (("holders first page", "holders deep page"), ("events first page", "events deep page"))
INDEX_COLUMNS = ["measure", "events", "blocks", "seconds (best of 2)", "events/s", "vs getLogs"]
CONTRACT = REPO / "bench" / "contracts" / "ActivityBatch.sol"
DEPOSITS, TRANSFERS, BURNS = 100, 180, 18  # per transaction of the helper, to a pool of holders
POOL, PER_TX, ADMIN_EVERY = 20_000, 400, 10  # PER_TX: 2 x (DEPOSITS + 1) + TRANSFERS + BURNS
SPAN = 20  # blocks per eth_getLogs / indexing step: ~7,000 logs
PROXIES = ("LiquidToken", "LiquidTokenManager", "StakerNodeCoordinator", "TokenRegistryOracle")


def run(ctx: Context, result: SectionResult) -> None:
    with ctx.server() as server:
        plan = {name: (server, path) for name, path in endpoints(ctx, result).items()}
        report(result, plan, PAIRS, pages(ctx, result, plan, PAIRS), lambda name: 0.30)
    ctx.log(f"activity: deploying the devnet and emitting {CHAIN_EVENTS:,} events…")
    with ctx.devnet("activity") as (rpc_url, manifest, db_url):
        began = time.perf_counter()
        txs = generate(rpc_url, manifest, CHAIN_EVENTS)
        generation, span = time.perf_counter() - began, str(SPAN)
        args = (rpc_url, manifest, db_url, span, "2", "ceiling", "decoded")
        figures = ctx.probe("bench.sections.activity", *args)
    result.notes.append(
        f"\nEvent generation on anvil (not timed below): {txs} transactions in "
        f"{generation:.1f} s, helper contract bench/contracts/ActivityBatch.sol included."
    )
    measures = {"ceiling": "eth_getLogs, JSON parsed"}
    measures |= {"decoded": "eth_getLogs + chain.activity decoder"}
    measures |= {"indexer": "deposit_index (service, fresh tables)"}
    rows, rates, runs = index_rows(result, figures, measures, CHAIN_EVENTS, blocks=True)
    result.notes += ["\nEvent indexing on anvil:", *table(INDEX_COLUMNS, rows)]
    check, same = figures["check"], figures["check"]["balances"] == figures["check"]["supply"]
    types = ", ".join(f"{k} {v:,}" for k, v in sorted(check["types"].items()))
    result.notes.append(
        f"{runs}\nevents stored by type: {types}; holders "
        f"{check['holders']:,} (tally {check['tally']:,}); balances sum {check['balances']} = "
        f"totalSupply {check['supply']}: {'yes' if same else 'NO'}; the indexer runs at "
        f"{rates['indexer'] / rates['ceiling']:.0%} of eth_getLogs alone (information, no target)"
    )
    if not same or check["holders"] != check["tally"]:
        result.failures.append(f"holders do not match the chain: {check}")


def endpoints(ctx: Context, result: SectionResult) -> dict[str, str]:
    ctx.django()
    from activity.api.views import EVENT_CURSOR_VERSION
    from activity.selectors import FEED_TYPES
    from core.api.cursors import cursor_encode

    seconds, lat = dataset.prepare_activity(ctx.db_url), dataset.MARKERS[0]
    feed = "FROM deposits_event WHERE lat_id = 1 AND type = ANY(%(types)s)"
    with dataset.connect(ctx.db_url) as conn:  # the cursor DEEP_SHARE into the LAT's feed
        count = conn.execute(f"SELECT count(*) {feed}", {"types": list(FEED_TYPES)}).fetchone()[0]
        skip, order = int(count * DEEP_SHARE), "ORDER BY block_number DESC, log_index DESC"
        block, log_index = conn.execute(
            f"SELECT block_number, log_index {feed} {order} OFFSET %(n)s LIMIT 1",
            {"types": list(FEED_TYPES), "n": skip - 1},
        ).fetchone()
    loaded = "reused" if seconds is None else f"loaded this run in {seconds:.0f} s"
    result.notes.append(
        f"\nHTTP data: {dataset.HOLDERS:,} holders (+{dataset.FORMER:,} at a zero balance) and "
        f"{dataset.EVENTS:,} events of {lat} ({loaded}); the deep events page follows a cursor "
        f"{skip:,} feed events deep (of the feed's {count:,}; mints and burns are stored but "
        "not in the feed)."
    )
    deep = cursor_encode(EVENT_CURSOR_VERSION, block, log_index)
    return {
        "baseline": "/bench/baseline",
        "holders first page": f"/lat/{lat}/holders",
        "holders deep page": f"/lat/{lat}/holders?skip=99000",
        "events first page": f"/lat/{lat}/events",
        "events deep page": f"/lat/{lat}/events?cursor={deep}",
    }


def index_rows(result, figures: dict, measures: dict, at_least: int, blocks=False):
    """The probe's best run of each measure as a row, the rates, and every run's seconds; a
    failure unless each indexer run stored what eth_getLogs read (at least `at_least`)."""
    best = {k: min(figures[k], key=lambda r: r["seconds"]) for k in measures}
    rates = {k: r["events"] / r["seconds"] for k, r in best.items()}
    rows, extra = [], [str(figures["blocks"])] if blocks else []
    for k, name in measures.items():
        rows.append([name, f"{best[k]['events']:,}", *extra, f"{best[k]['seconds']:.2f}"])
        rows[-1] += [f"{rates[k]:,.0f}", f"{rates[k] / rates['ceiling']:.2f}"]
    stored, logs = [r["events"] for r in figures["indexer"]], best["ceiling"]["events"]
    if any(n != logs for n in stored) or logs < at_least:
        result.failures.append(f"indexer stored {stored} events; eth_getLogs read {logs}")
    runs = (f"{k} " + ", ".join(f"{r['seconds']:.2f}s" for r in figures[k]) for k in measures)
    return rows, rates, "runs: " + "; ".join(runs)


def generate(rpc_url: str, manifest: dict, events: int) -> int:
    """At least `events` events (bench/contracts/ActivityBatch.sol, and every ADMIN_EVERY
    transactions a pause, unpause, price and delegation): the number of transactions."""
    from devchain.compile import compile_files
    from devchain.devnet import BENCH_SENDER, DEPLOYER, OPERATORS, connect, contract

    w3 = connect(rpc_url, timeout=300)
    accounts, asset = w3.eth.accounts, manifest["tokens"][0]["address"]
    sender, batches = {"from": accounts[BENCH_SENDER], "gas": 40_000_000}, -(-events // PER_TX)
    built = compile_files([CONTRACT])["ActivityBatch"]
    factory = w3.eth.contract(abi=built["abi"], bytecode=built["bytecode"])
    deployed = _wait(w3, factory.constructor(manifest["proxyAddress"], asset).transact(sender))
    helper = w3.eth.contract(address=deployed["contractAddress"], abi=built["abi"]).functions
    token = contract(w3, "TestERC20", asset).functions
    one = 10 ** token.decimals().call()
    minted = one * (DEPOSITS + TRANSFERS + BURNS + 1) * batches
    _wait(w3, token.mint(deployed["contractAddress"], minted).transact(sender))
    lat = contract(w3, "LiquidToken", manifest["proxyAddress"]).functions
    manager = manifest["contractDeployments"]["proxy"]["liquidTokenManager"]["address"]
    manager = contract(w3, "LiquidTokenManager", manager).functions
    price, owner = manager.getTokenInfo(asset).call()[1], {"from": accounts[DEPLOYER], "gas": 10**6}
    hashes, operator = [], accounts[OPERATORS[0]]
    for batch in range(batches):
        if batch % ADMIN_EVERY == 0:  # node 2 is undelegated in the devnet's latETH
            calls = [lat.pause(), lat.unpause(), manager.updatePrice(asset, price + batch % 20)]
            calls += [manager.delegateNodes([2], [operator], [(b"", 0)], [bytes(32)])]
            hashes += [c.transact(owner) for c in [*calls, manager.undelegateNodes([2])]]
        run = helper.run(batch, POOL, one, DEPOSITS, TRANSFERS, BURNS)
        hashes.append(run.transact(sender))
    _wait(w3, hashes[-1])
    if failed := [h for h in hashes if w3.eth.get_transaction_receipt(h)["status"] != 1]:
        raise RuntimeError(f"{len(failed)} transactions reverted")
    return len(hashes)


def _wait(w3, tx_hash):
    receipt = w3.eth.wait_for_transaction_receipt(tx_hash, timeout=120, poll_latency=0.01)
    if receipt["status"] != 1:
        raise RuntimeError(f"transaction {tx_hash.hex()} reverted")
    return receipt


def logs(rpc: str, addresses: list[str], start: int, head: int, decode, span: int) -> dict:
    """eth_getLogs of `addresses` and the table's topics over ranges of `span` blocks, as the
    indexer asks, the JSON parsed (each log decoded with `decode`): events and seconds."""
    import requests

    from chain.activity import activity_topics

    session, n, began = requests.Session(), 0, time.perf_counter()
    query = {"address": addresses, "topics": [activity_topics()]}
    for block in range(start, head + 1, span):
        query |= {"fromBlock": hex(block), "toBlock": hex(min(block + span - 1, head))}
        found = bench.rpc(rpc, "eth_getLogs", query, session=session)
        n += sum(decode(log) is not None for log in found) if decode else len(found)
    return {"events": n, "seconds": time.perf_counter() - began}


def probe(rpc: str, manifest_path: str, span: str, runs: str, *kinds: str) -> dict:
    """Twice each of `kinds` ("ceiling": eth_getLogs, "decoded": and the decoder), then RUNS runs
    of deposit_index from empty tables (the LAT imported afresh), with the CPU of this process
    and of the database's backends; the checks, Ponder's setup, and the LAT deleted."""
    import django

    django.setup()
    from activity.indexer import deposit_index
    from chain.activity import activity_decoder
    from chain.gateway import gateway_for_url
    from deposits.models import Deposit, Event
    from lats.manifests import lat_import_manifests, manifest_parse

    manifest = manifest_parse(json.loads(Path(manifest_path).read_text()), source=manifest_path)
    (lat,) = lat_import_manifests(manifests=[manifest])
    gateway, span = gateway_for_url(rpc, timeout=300), int(span)
    head = gateway.head().number
    proxies, nodes, beacon, contracts = _emitters(gateway, lat, head)
    decoder = activity_decoder(proxies, nodes={a: i for i, a in enumerate(nodes)}, beacon=beacon)
    addresses = list(dict.fromkeys(a for group in contracts.values() for a in group))
    out: dict = {"blocks": head - lat.deployment_block + 1, "indexer": []}
    for kind in kinds:
        args = (rpc, addresses, lat.deployment_block, head, kind == "decoded" and decoder, span)
        out[kind] = [logs(*args) for _ in range(2)]
    for _ in range(int(runs)):
        lat.delete()
        (lat,) = lat_import_manifests(manifests=[manifest])
        db, cpu, began = _backends(), time.process_time(), time.perf_counter()
        deposit_index(lat=lat, max_range=span)
        run = {"seconds": time.perf_counter() - began, "cpu": time.process_time() - cpu}
        run["db_cpu"] = sum(t - db.get(pid, 0) for pid, t in _backends().items()) / load.TICK
        run |= {"events": Event.objects.filter(lat=lat).count()}
        out["indexer"].append(run | {"deposits": Deposit.objects.filter(lat=lat).count()})
    out |= _checks(rpc, lat, contracts)
    lat.delete()
    return out


def _emitters(gateway, lat, head: int):
    """The LAT's proxies by name, its staker nodes, the node beacon, and every address whose
    events the indexer reads by ABI name."""
    from chain.abi import function

    deployed = lat.contract_deployments["proxy"]
    proxies = {n: deployed[k] for n in PROXIES if (k := n[0].lower() + n[1:]) in deployed}
    proxies["LiquidToken"] = lat.proxy_address
    get_nodes, coordinator = function(PROXIES[2], "getAllNodes"), proxies[PROXIES[2]]
    (nodes,) = get_nodes.decode(gateway.call(coordinator, get_nodes.encode(), block=head))
    beacon = gateway.node_beacon(coordinator, block=head)
    contracts = {n: [a] for n, a in proxies.items()} | {"StakerNode": list(nodes)}
    contracts["TransparentUpgradeableProxy"] = [*proxies.values(), *filter(None, [beacon])]
    return proxies, nodes, beacon, contracts


def _backends() -> dict[int, int]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pid FROM pg_stat_activity WHERE datname = current_database()")
        return load.ticks([pid for (pid,) in cursor.fetchall()])


def _checks(rpc: str, lat, contracts: dict) -> dict:
    """totalSupply() on chain against the stored balances and the tally, the events by type, the
    listing's counts; Ponder's setup (the same contracts and events)."""
    from django.db.models import Count, Sum

    from chain.abi import ABI_DIR
    from chain.activity import ACTIVITY_EVENTS
    from deposits.models import Deposit, DepositCount, Event, Holder, HolderTally

    holders, call = Holder.objects.filter(lat=lat, balance__gt=0), {"to": lat.proxy_address}
    counts = DepositCount.objects.filter(field="").values_list("n", flat=True)
    check = {"supply": int(bench.rpc(rpc, "eth_call", call | {"data": "0x18160ddd"}, "latest"), 16)}
    check |= {"balances": int(holders.aggregate(s=Sum("balance"))["s"] or 0)}
    check |= {"holders": holders.count(), "tally": HolderTally.objects.get(lat=lat).holders}
    check["types"] = dict(Event.objects.filter(lat=lat).values_list("type").annotate(n=Count("id")))
    check["counts_ok"] = sum(counts) == Deposit.objects.count()
    abi = {n: json.loads((ABI_DIR / f"{n}.json").read_text()) for n in contracts}
    setup = {"chainId": lat.chain_id, "startBlock": lat.deployment_block, "table": ACTIVITY_EVENTS}
    return {
        "check": check,
        "setup": setup | {"contracts": {n: [a, abi[n]] for n, a in contracts.items()}},
    }


if __name__ == "__main__":
    print(json.dumps(probe(*sys.argv[1:])))
