"""Section `yields`: the rewards APY's history of a LAT whose AVS has 250 registered operators and
13 strategies, on anvil with a year of days: the backfill of 365 days on a fresh import (at most
60 s) and the daily update (at most 1 s), with the JSON-RPC calls each makes; GET /yields and GET
/lat/{address}/rates beside the baseline (each at least 30% of its req/s)."""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time

import requests
from eth_abi import encode
from eth_utils import keccak, to_checksum_address

from bench import dataset
from bench.context import Context, SectionResult

TITLE = "Rewards APY history on anvil: 365-day backfill, daily update, /yields and /rates reads"
MAX_BACKFILL, MAX_DAILY, MIN_RATIO, ROUNDS, ROUND_SECONDS = 60.0, 1.0, 0.30, 6, 2.0
QUIET_DAYS = 390  # the devnet's D0 400 days back; the bench's AVS is set up 30 days later
OPERATORS, RESERVE, STRATEGIES = 247, 8, 13  # 247 + the devnet's 3 registered = 250
WAD, DAY, GAS, SEND_CHUNK = 10**18, 86_400, 1_500_000, 500
COLUMNS = ["measure", "seconds", "in RPC s", "round trips", "requests", "eth_call", "rows"]
COLUMNS += ["target"]


def _address(kind: str, i: int) -> str:
    return to_checksum_address(keccak(f"bench-yields:{kind}:{i}".encode())[-20:])


def _data(signature: str, *args) -> str:
    types = signature[signature.index("(") + 1 : -1]
    head = keccak(signature.encode())[:4]
    return "0x" + (head + encode(_split(types), list(args))).hex()


def _split(types: str) -> list[str]:
    """Top-level ABI types of a comma-separated list (tuples kept whole)."""
    out, depth, part = [], 0, ""
    for char in types:
        depth += (char == "(") - (char == ")")
        if char == "," and depth == 0:
            out, part = [*out, part], ""
        else:
            part += char
    return [*out, part] if part else out


class Chain:
    """Transactions sent by any address (anvil impersonates them) in JSON-RPC batches, mined in
    as few blocks as the gas limit allows, every receipt checked."""

    def __init__(self, url: str) -> None:
        self.url, self.session, self.sent, self.created = url, requests.Session(), 0, None

    def call(self, method: str, *params):
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": list(params)}
        answer = self.session.post(self.url, json=body, timeout=300).json()
        if "error" in answer:
            raise RuntimeError(f"{method}: {answer['error']}")
        return answer["result"]

    def batch(self, calls: list[tuple[str, list]]) -> list:
        out = []
        for start in range(0, len(calls), SEND_CHUNK):
            chunk = calls[start : start + SEND_CHUNK]
            body = [
                {"jsonrpc": "2.0", "id": i, "method": m, "params": p}
                for i, (m, p) in enumerate(chunk)
            ]
            answers = sorted(self.session.post(self.url, json=body, timeout=300).json(), key=_id)
            if errors := [a["error"] for a in answers if "error" in a]:
                raise RuntimeError(f"{len(errors)} of {len(chunk)} failed: {errors[:2]}")
            out += [a["result"] for a in answers]
        return out

    def send(self, txs: list[tuple[str, str, str]], deploy=None) -> None:
        """(from, to, calldata) in order (each sender's nonces in order), SEND_CHUNK at a time,
        each chunk mined until none is pending; a reverted one raises. Receipts are read by
        block (anvil's eth_getTransactionReceipt slows with the transactions of its block)."""
        senders = sorted({f for f, _, _ in txs})
        counts = self.batch([("eth_getTransactionCount", [f, "latest"]) for f in senders])
        nonces = {f: int(n, 16) for f, n in zip(senders, counts, strict=True)}
        params = []
        for f, t, d in txs:  # each sender's nonces in order (a batch is served concurrently)
            params.append({"from": f, "to": t, "data": d, "gas": hex(GAS), "nonce": hex(nonces[f])})
            nonces[f] += 1
        params = [deploy] if deploy else params
        first = int(self.call("eth_blockNumber"), 16) + 1
        self.call("evm_setAutomine", False)
        try:
            for start in range(0, len(params), SEND_CHUNK):
                self.batch(
                    [("eth_sendTransaction", [p]) for p in params[start : start + SEND_CHUNK]]
                )
                while int(self.call("txpool_status")["pending"], 16):
                    self.call("evm_mine")
        finally:
            self.call("evm_setAutomine", True)
        blocks = range(first, int(self.call("eth_blockNumber"), 16) + 1)
        receipts = [
            r for rs in self.batch([("eth_getBlockReceipts", [hex(n)]) for n in blocks]) for r in rs
        ]
        if len(receipts) != len(txs) or any(r["status"] != "0x1" for r in receipts):
            failed = sum(r["status"] != "0x1" for r in receipts)
            raise RuntimeError(
                f"{failed} of {len(txs)} transactions reverted ({len(receipts)} mined)"
            )
        self.sent, self.created = self.sent + len(txs), receipts[-1]["contractAddress"]


def _id(answer: dict) -> int:
    return answer["id"]


class World:
    """The AVS of latETH grown to 250 operators and 13 strategies, and its year: `on_day` is
    deploy_devnet's hook, called every 30 quiet days (the first call sets the AVS up)."""

    def __init__(self) -> None:
        self.strategies: list[str] = []
        self.tokens: list[str] = []
        self.chain: Chain | None = None
        self.facts = {"operators": 0, "stakers": 0, "submissions": 0, "directed": 0}
        self.facts |= {"registrations": 0, "deregistrations": 0, "splits": 0}

    def on_day(self, url: str, day: int, manifests: list[dict]) -> None:
        if day > QUIET_DAYS:
            return
        self.chain = self.chain or Chain(url)
        self.chain.call("anvil_setBlockTimestampInterval", 1)
        if not self.strategies:
            self._setup(manifests)
        self._month(day // 30 - 1)

    def _setup(self, manifests: list[dict]) -> None:
        lat = next(m for m in manifests if m["symbol"] == "latETH")
        self.el, self.avs, chain = lat["eigenlayer"], lat["avsAddress"], self.chain
        self.owner = to_checksum_address(chain.call("eth_accounts")[7])  # the AVS's account
        self.reward_tokens = [t["address"] for t in lat["tokens"]]
        pairs = {t["strategy"]: t["address"] for m in manifests for t in m["tokens"]}
        chain.call("anvil_autoImpersonateAccount", True)
        for k in range(STRATEGIES - len(pairs)):
            token = self._deploy("TestERC20", f"Bench {k}", f"B{k}", 18)
            pairs[self._deploy("Strategy", token, self.el["strategyManager"], WAD)] = token
        self.strategies = sorted(pairs, key=lambda a: int(a, 16))
        self.tokens = [pairs[s] for s in self.strategies]
        self.operators = [_address("operator", i) for i in range(OPERATORS + RESERVE)]
        stakers = [(_address("staker", i), i % len(self.operators)) for i in range(300)]
        everyone = [*self.operators, *(s for s, _ in stakers), self.owner]
        chain.batch([("anvil_setBalance", [a, hex(10**24)]) for a in everyone])
        dm = self.el["delegationManager"]
        txs = []
        for i, op in enumerate(self.operators):
            txs.append((op, dm, _data("registerAsOperator(address,uint32,string)", op, 0, "")))
            txs += self._stake(op, range(STRATEGIES), (1 + i % 17) * WAD)
        for i, (staker, _) in enumerate(stakers):
            txs += self._stake(staker, [(i + k * 4) % STRATEGIES for k in range(3)], 5 * WAD)
        for token in self.reward_tokens:
            txs.append((self.owner, token, _data("mint(address,uint256)", self.owner, 10**30)))
            txs.append((self.owner, token, _data("approve(address,uint256)", self.avs, 2**255)))
        chain.send(txs)
        delegate = "delegateTo(address,(bytes,uint256),bytes32)"
        txs = [(s, dm, _data(delegate, self.operators[o], (b"", 0), bytes(32))) for s, o in stakers]
        for i, op in enumerate(self.operators[:OPERATORS]):
            txs += self._register(op, self.strategies if i % 10 else self.strategies[::2])
            if i % 5 == 0:
                txs.append(self._split(op, 500 + (i % 10) * 100))
        chain.send(txs)
        self.facts["operators"], self.facts["stakers"] = len(self.operators), len(stakers)

    def _month(self, k: int) -> None:
        """Month k (0: the day of the setup) of the year: two AVS submissions over the next 30
        days, an operator-directed one for the 29 before, from month 1 on a registration (the
        first RESERVE months), every third month a deregistration, two split changes."""
        latest = int(self.chain.call("eth_getBlockByNumber", "latest", False)["timestamp"], 16)
        today = latest - latest % DAY
        everything = [(s, WAD * (1 + j % 3)) for j, s in enumerate(self.strategies)]
        few = [(s, WAD) for s in self.strategies[:5]]
        txs = [self._submit(self.reward_tokens[0], everything, 30 * WAD, today, 30 * DAY)]
        txs.append(self._submit(self.reward_tokens[-1], few, 10**8 * (k + 1), today, 30 * DAY))
        named = sorted(self.operators[(k * 40) % OPERATORS :][:40], key=lambda a: int(a, 16))
        rewards = [(op, WAD // 10 * (1 + n % 4)) for n, op in enumerate(named)]
        directed = (everything, self.reward_tokens[0], rewards, today - 30 * DAY, 29 * DAY, "bench")
        signature = "createOperatorDirectedAVSRewardsSubmission(((address,uint96)[],address,"
        signature += "(address,uint256)[],uint32,uint32,string)[])"
        txs.append((self.owner, self.avs, _data(signature, [directed])))
        if 1 <= k <= RESERVE:
            txs += self._register(self.operators[OPERATORS + k - 1], self.strategies)
            self.facts["registrations"] += 1
        if k and k % 3 == 0:
            gone = self.operators[k * 17 % OPERATORS]
            txs.append((self.owner, self.avs, _data("deregisterOperatorFromAVS(address)", gone)))
            self.facts["deregistrations"] += 1
        txs += [
            self._split(self.operators[(k * 7 + n) % OPERATORS], 1000 + 100 * k) for n in (0, 1)
        ]
        self.facts["submissions"] += 2
        self.facts["directed"] += 1
        self.chain.send(txs)

    def _stake(self, who: str, strategies, amount: int) -> list[tuple[str, str, str]]:
        sm, txs = self.el["strategyManager"], []
        for j in strategies:
            token, strategy = self.tokens[j], self.strategies[j]
            txs.append((who, token, _data("mint(address,uint256)", who, amount)))
            txs.append((who, token, _data("approve(address,uint256)", sm, amount)))
            deposit = _data("depositIntoStrategy(address,address,uint256)", strategy, token, amount)
            txs.append((who, sm, deposit))
        return txs

    def _register(self, op: str, restaked: list[str]) -> list[tuple[str, str, str]]:
        restake = _data("setOperatorRestakedStrategies(address,address[])", op, restaked)
        register = _data("registerOperatorToAVS(address)", op)
        return [(self.owner, self.avs, register), (self.owner, self.avs, restake)]

    def _split(self, op: str, bips: int) -> tuple[str, str, str]:
        self.facts["splits"] += 1
        call = _data("setOperatorAVSSplit(address,address,uint16)", op, self.avs, bips)
        return (op, self.el["rewardsCoordinator"], call)

    def _submit(self, token: str, strategies, amount: int, start: int, duration: int):
        signature = (
            "createAVSRewardsSubmission(((address,uint96)[],address,uint256,uint32,uint32)[])"
        )
        return (
            self.owner,
            self.avs,
            _data(signature, [(strategies, token, amount, start, duration)]),
        )

    def _deploy(self, name: str, *args) -> str:
        from devchain.devnet import load_artifacts

        artifact = load_artifacts()[name]
        inputs = next(x["inputs"] for x in artifact["abi"] if x["type"] == "constructor")
        code = artifact["bytecode"] + encode([x["type"] for x in inputs], list(args)).hex()
        tx = {"from": self.owner, "data": code, "gas": hex(5_000_000)}
        self.chain.send([(self.owner, "", code)], deploy=tx)
        return self.chain.created


def run(ctx: Context, result: SectionResult) -> None:
    from devchain.devnet import deploy_eth_usd_feed, write_manifests

    result.columns, world, began = COLUMNS, World(), time.perf_counter()
    with (
        ctx.devnet("yields", quiet_days=QUIET_DAYS, on_day=world.on_day) as (url, manifest, db_url),
        tempfile.TemporaryDirectory(prefix="lat-bench-") as tmp,
    ):
        feed = deploy_eth_usd_feed(url)
        dataset.manage(
            {**ctx.env, "RPC_URL": url},
            db_url,
            "lat_import",
            str(write_manifests([manifest], tmp)[0]),
        )
        built = time.perf_counter() - began
        ctx.log(f"yields: world built in {built:.0f} s ({world.chain.sent:,} transactions)")
        figures = ctx.probe("bench.sections.yields", url, manifest, db_url, feed)
        paths = {
            "yields": "/yields",
            "rates (day, 90 days)": f"/lat/{manifest['proxyAddress']}/rates",
            "rates (hour)": f"/lat/{manifest['proxyAddress']}/rates?interval=hour",
        }
        env = {"DATABASE_URL": db_url, "ETH_USD_FEED_31337": feed, "RPC_URL": url}
        with ctx.server(**env) as server:
            for name, path in paths.items():
                _read(ctx, result, server, name, path)
    _report(result, figures, world, built)


def _report(result: SectionResult, figures: dict, world: World, built: float) -> None:
    for name, limit in (("backfill", MAX_BACKFILL), ("daily", MAX_DAILY)):
        run, rows = figures[name], figures[f"{name}_rows"]
        rows_text = ", ".join(f"{v:,} {k}" for k, v in rows.items())
        result.rows.append(_row(f"metrics_refresh: {name}", run, rows_text, f"<= {limit:g} s"))
        for step, label in PHASES.items():
            if step in run["phases"]:
                result.rows.append(_row(f"  {label}", run["phases"][step], "", ""))
        calls = run["calls"]
        detail = f"{run['seconds']:.2f} s, {calls['round_trips']:,} round trips "
        detail += f"({calls['requests']:,} requests)"
        result.target(f"{name} at most {limit:g} s", run["seconds"], detail, at_most=limit)
    facts, last = world.facts, figures["last_day"]
    per_month = facts["submissions"] // max(1, facts["directed"])
    result.notes += [
        f"\nThe world (setup, not measured: {built:.0f} s, {world.chain.sent:,} transactions): "
        f"the devnet with {QUIET_DAYS} quiet days (a block every UTC day); latETH's AVS (its "
        f"ServiceManager) with {len(world.strategies)} strategies, {facts['operators']} operators "
        f"of the bench self-staking in each ({OPERATORS} registered beside the devnet's 3, "
        f"{RESERVE} in reserve registering month by month, every 10th restaking 7 strategies), "
        f"{facts['stakers']} stakers delegated to them; every 30 days {per_month} AVS submissions "
        "(the next 30 days) and an operator-directed one (the 29 days before); in all "
        f"{facts['registrations']} registrations, {facts['deregistrations']} deregistrations, "
        f"{facts['splits']} splits set. The last AvsDay read ({last['day']}): "
        f"{last['operators']} operators registered all day, {last['strategies']} strategies.",
        "Calls: the service's own JSON-RPC counters (core/telemetry.py): round trips (a batch is "
        "one), requests (each of a batch), eth_call (each a Multicall3 aggregate or a plain "
        "call); in RPC s: the seconds spent waiting on those round trips (the node's share). The "
        "indented rows are metrics_refresh's steps (AVS events hold the AVS days).",
        f"Backfill methods: {json.dumps(figures['backfill']['calls']['methods'])}",
        f"Daily methods: {json.dumps(figures['daily']['calls']['methods'])}",
        f"APY windows after the daily update: {json.dumps(figures['apys'])}",
        f"Gaps: {figures['gaps']}",
    ]


def _read(ctx: Context, result: SectionResult, server, name: str, path: str) -> None:
    """GET `path` interleaved with the baseline: the ratio target."""
    sides = [(server.url("/bench/baseline"), None), (server.url(path), None)]
    settings = {"rounds": ROUNDS, "duration": ROUND_SECONDS, "warmup": ctx.args.warmup}
    theirs, mine = ctx.interleave(sides, **settings)
    result.check(f"{name} interleaved with the baseline", mine, server)
    result.check(f"baseline beside {name}", theirs, server)
    ratio = mine.rps / theirs.rps
    detail = f"{ratio:.1%} ({mine.rps:,.0f} vs {theirs.rps:,.0f} req/s, p50 {mine.p50_ms:.2f} vs "
    detail += f"{theirs.p50_ms:.2f} ms; {ROUNDS} rounds of {ROUND_SECONDS:g} s, {path})"
    result.target(
        f"GET {name} >= {MIN_RATIO:.0%} of baseline req/s", ratio, detail, at_least=MIN_RATIO
    )


def _row(label: str, run: dict, rows: str, target: str) -> list[str]:
    calls = run["calls"]
    eth_call = calls["methods"].get("eth_call", 0)
    trips, requests = f"{calls['round_trips']:,}", f"{calls['requests']:,}"
    seconds, waited = f"{run['seconds']:.2f}", f"{calls['rpc_seconds']:.2f}"
    return [label, seconds, waited, trips, requests, f"{eth_call:,}", rows, target]


def _calls() -> dict:
    from core.telemetry import RPC_DURATION, RPC_REQUESTS

    methods: dict[str, int] = {}
    for sample in (s for m in RPC_REQUESTS.collect() for s in m.samples):
        if sample.name.endswith("_total"):
            key = sample.labels["method"]
            methods[key] = methods.get(key, 0) + int(sample.value)
    timed = [s for m in RPC_DURATION.collect() for s in m.samples]
    trips = sum(s.value for s in timed if s.name.endswith("_count"))
    waited = sum(s.value for s in timed if s.name.endswith("_sum"))
    out = {"round_trips": int(trips), "requests": sum(methods.values()), "methods": methods}
    return out | {"rpc_seconds": waited}


def _minus(after: dict, before: dict) -> dict:
    methods = {k: v - before["methods"].get(k, 0) for k, v in after["methods"].items()}
    return {
        "round_trips": after["round_trips"] - before["round_trips"],
        "requests": after["requests"] - before["requests"],
        "rpc_seconds": after["rpc_seconds"] - before["rpc_seconds"],
        "methods": {k: v for k, v in sorted(methods.items()) if v},
    }


PHASES = {  # metrics.services' steps, timed apart (avs_index holds the AVS's days)
    "avs_index": "AVS events (with its days)",
    "avs_days_update": "AVS days",
    "lat_days_update": "LAT days",
    "rates_update": "rate points",
    "usd_price_update": "ETH/USD price",
    "snapshot_record": "snapshot and windows",
}


def probe(rpc_url: str, manifest_file: str, feed: str) -> dict:
    """In its own process, Django on the section's database: the import's other steps (state,
    deposits; not measured), then metrics_refresh timed on the fresh import (each of its steps
    too), a day mined (24 blocks an hour apart), and metrics_refresh timed again."""
    os.environ["ETH_USD_FEED_31337"] = feed
    import django

    django.setup()
    from lats.models import Lat
    from metrics import services
    from metrics.models import AvsDay, LatDay, RatePoint
    from sync.refresh import index_deposits, refresh_state

    phases: dict = {}

    def timed(name: str, step):
        def wrapper(*args, **kwargs):
            before, began = _calls(), time.perf_counter()
            try:
                return step(*args, **kwargs)
            finally:
                seconds = time.perf_counter() - began
                phases[name] = {"seconds": seconds, "calls": _minus(_calls(), before)}

        return wrapper

    for name in PHASES:
        setattr(services, name, timed(name, getattr(services, name)))
    address = json.loads(open(manifest_file).read())["proxyAddress"]
    lat = Lat.objects.get(proxy_address__iexact=address)
    refresh_state(lat=lat)
    index_deposits(lat=lat)
    out: dict = {}
    for name in ("backfill", "daily"):
        if name == "daily":
            Chain(rpc_url).call("anvil_mine", hex(24), hex(3600))
        lat, phases = Lat.objects.get(pk=lat.pk), {}
        before, began = _calls(), time.perf_counter()
        services.metrics_refresh(lat=lat)
        out[name] = {"seconds": time.perf_counter() - began, "calls": _minus(_calls(), before)}
        out[name]["phases"] = phases
        out[f"{name}_rows"] = {
            "AvsDay": AvsDay.objects.filter(avs_id=lat.avs_id).count(),
            "LatDay": LatDay.objects.filter(lat=lat).count(),
            "RatePoint": RatePoint.objects.filter(lat=lat).count(),
        }
    last = AvsDay.objects.filter(avs_id=lat.avs_id).order_by("-day").first()
    out["last_day"] = {"day": str(last.day), "operators": last.operators}
    out["last_day"]["strategies"] = len(last.strategies)
    lat = Lat.objects.get(pk=lat.pk)
    out["apys"] = {w: v["apy"] for w, v in (lat.apys or {}).items()}
    out["gaps"] = lat.apy_gaps
    return out


if __name__ == "__main__":
    print(json.dumps(probe(*sys.argv[1:])))
