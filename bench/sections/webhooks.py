"""Section `webhooks`: the Procfile's web, follower and webhooks processes on anvil with the
devnet (latETH synced, chain 31337 at 2 confirmations); receivers are asyncio HTTP servers on
loopback in the bench process (WEBHOOK_ALLOW_HTTP, WEBHOOK_ALLOW_PRIVATE_HOSTS, their ports
allowed), registered through the API with a key from `lat_apikey`.
(a) 20 deposits of latETH, each 1 s after the last one's confirmation, to 10 endpoints: seconds
from the confirming block mined to each endpoint's first POST of the deposit (200 samples); run
twice, as `freshness` runs: with the follower polling the head, then (W) with the follower
started again with WS_URL_31337 set (anvil's WebSocket endpoint: new heads pushed). W's target
is `freshness`'s W target, p95 at most 0.5 s (none of its own is set for webhooks with a
WebSocket node); the polled run keeps its 2 s. (b) and (c) run on after W: the outbox is filled
straight, the follower's head plays no part in them.
(b) Per run, 10,000 events written straight into the outbox (one INSERT ... SELECT of
deposit-shaped payloads and the outbox's NOTIFY: the dispatcher is measured, not the indexer),
event i naming wallet i mod 50, endpoint j (j < 49) subscribed to wallet j, under one API key.
Runs A: those 49, which answer at once; runs B: the same beside 100 endpoints that accept and
never answer a delivery (five API keys of 20, each subscribed to one of the 49's wallets: 20,000
deliveries that hang for WEBHOOK_TIMEOUT, then fail and are retried). Order A B B A (both sides
see the machine's drift); latency from the INSERT's commit to each POST received by the 49,
merged per side for the target.
(c) 20,000 events as in (b) to 50 endpoints that answer at once (one wallet each): deliveries
per second from the commit to the last POST received.
Receivers keep connections alive (HTTP/1.1), as web servers do; the silent ones answer a HEAD
(the registration's probe) but never a POST."""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import threading
import time
from pathlib import Path

import requests

from bench import PYTHON, dataset, python, rpc
from bench.context import HOST, NO_LIMIT, Context, Processes, SectionResult, wait_until
from bench.load import percentile
from bench.sections.freshness import follow_websocket
from devchain.anvil import free_port

TITLE = "Webhooks: first attempt; latency beside 100 endpoints that never answer; throughput"
DEPOSITS, LATENCY_ENDPOINTS, EVENTS, ENDPOINTS, TARGET_P95, MAX_RATIO = 20, 10, 10_000, 50, 2, 1.5
TARGET_P95_W = 0.5  # (a) with WS_URL set, as `freshness`'s run W
SILENT_KEYS, SILENT_PER_KEY, THROUGHPUT_EVENTS, TARGET_RATE = 5, 20, 20_000, 1000
COLUMNS = ["run", "endpoints", "deliveries", "seconds", "deliveries/s", "p50 s", "p95 s", "max s"]
SETTINGS = {"LOG_LEVEL": "WARNING", "CHAIN_CONFIRMATIONS_31337": "2", "DJANGO_DEBUG": "false",
    "SECURE_SSL_REDIRECT": "false", "ALLOWED_HOSTS": HOST, "WEB_CONCURRENCY": "1",
    "RATE_LIMIT_ANON": NO_LIMIT, "RATE_LIMIT_KEYED": NO_LIMIT, "WEBHOOKS_PER_KEY": "99",
    "WEBHOOK_ALLOW_HTTP": "true", "WEBHOOK_ALLOW_PRIVATE_HOSTS": "true"}  # fmt: skip
INSERT = """INSERT INTO webhooks_outboxevent
    (event_id, type, lat_id, block_number, log_index, wallets, payload, created_at, removed)
SELECT e.id, 'deposit', %(lat)s::bigint, i, 0, jsonb_build_array(e.w), jsonb_build_object('id',
    e.id, 'type', 'deposit', 'createdAt', now(), 'data', jsonb_build_object('type', 'deposit',
    'blockNumber', i, 'blockTimestamp', now(), 'transactionHash', '0x' || md5(e.id) || md5(e.id),
    'logIndex', 0, 'lat', %(address)s::text, 'chainId', 31337, 'args', jsonb_build_object(
    'sender', e.w, 'receiver', e.w, 'asset', e.w, 'amount', '1' || repeat('0', 18), 'shares',
    '1' || repeat('0', 18)))), now(), false
FROM generate_series(1, %(n)s) i, LATERAL (SELECT %(run)s::text || i AS id,
    '0x' || lpad(to_hex(i %% %(k)s + 1), 40, '0') AS w) e"""


class Receivers:
    """HTTP servers on one asyncio loop in a thread; `got[port][id]`: its first POST's time."""

    def __init__(self) -> None:
        self.loop, self.got = asyncio.new_event_loop(), {}
        threading.Thread(target=self.loop.run_forever, daemon=True).start()

    def add(self, *, answers: bool = True) -> int:
        async def serve(reader, writer) -> None:
            try:
                while head := await reader.readuntil(b"\r\n\r\n"):
                    if head.startswith(b"HEAD "):  # the registration's probe
                        writer.write(
                            b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n"
                        )
                        await writer.drain()
                        continue
                    while not answers:
                        await asyncio.sleep(3600)
                    size = re.search(rb"(?i)\r\ncontent-length: *(\d+)", head)
                    await reader.readexactly(int(size.group(1)) if size else 0)
                    if found := re.search(rb"(?i)\r\nwebhook-id: *(\S+)", head):
                        self.got[port].setdefault(found.group(1).decode(), time.monotonic())
                    writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
                    await writer.drain()
            except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
                pass
            finally:
                writer.close()

        start = asyncio.start_server(serve, HOST, 0, backlog=1024)
        server = asyncio.run_coroutine_threadsafe(start, self.loop).result()
        port = server.sockets[0].getsockname()[1]
        self.got[port] = {}
        return port

    def since(self, ports: list[int], prefix: str | tuple[str, ...], start: float) -> list[float]:
        """Seconds from `start` to the first POST of each id starting with `prefix` (or one of
        them)."""
        got = [self.got[port].copy().items() for port in ports]  # copy(): atomic
        return [at - start for items in got for i, at in items if i.startswith(prefix)]


def _event_id(log: dict) -> str:
    """The webhook id of a log of chain 31337 (webhooks.outbox.event_id)."""
    text = f"31337:{log['blockHash']}:{log['transactionHash']}:{int(log['logIndex'], 16)}"
    return "evt_" + hashlib.sha256(text.lower().encode()).hexdigest()[:32]


def quantiles(got: list[float]) -> list[str]:
    return [f"{percentile(got, q):.2f}" for q in (0.5, 0.95, 1.0)] if got else ["-"] * 3


def run(ctx: Context, result: SectionResult) -> None:
    result.columns, rx = COLUMNS, Receivers()
    ports = [rx.add() for _ in range(ENDPOINTS)]
    silent = [rx.add(answers=False) for _ in range(SILENT_KEYS * SILENT_PER_KEY)]
    with ctx.devnet("webhooks", synced=True) as (rpc_url, manifest, db_url):
        env = {**ctx.env, **SETTINGS, "DATABASE_URL": db_url, "RPC_URL": rpc_url}
        env |= {"PATH": f"{Path(PYTHON).parent}{os.pathsep}{os.environ['PATH']}"}
        allowed = ",".join(map(str, ports + silent))
        env |= {"PORT": str(free_port()), "WEBHOOK_ALLOWED_PORTS": allowed}
        base = f"http://{HOST}:{env['PORT']}/webhooks"

        def client(name: str) -> requests.Session:
            key = python("manage.py", "lat_apikey", "create", "--name", name, env=env)
            session = requests.Session()
            session.headers["X-API-Token"] = key.split()[-1]
            return session

        api = client("bench")

        def register(port: int, via: requests.Session = api, **filters) -> str:
            answer = via.post(base, json={"url": f"http://{HOST}:{port}/", **filters})
            if answer.status_code != 201:
                raise RuntimeError(f"POST /webhooks: {answer.status_code} {answer.text[:300]}")
            return answer.json()["data"]["id"]

        def delete(hooks: list[tuple[requests.Session, str]]) -> None:
            for via, hook in hooks:
                via.delete(f"{base}/{hook}").raise_for_status()

        with Processes(ctx.log) as procs:
            procs.procfile(("web", "follower", "webhooks"), env)
            if not wait_until(lambda: api.get(base, timeout=2).ok, 90, procs.dead):
                raise RuntimeError("web did not answer GET /webhooks within 90 s")
            silent_keys = [client(f"silent {k}") for k in range(SILENT_KEYS)]
            hooks = [register(port) for port in ports[:LATENCY_ENDPOINTS]]
            _latency(result, rx, ports[:LATENCY_ENDPOINTS], (rpc_url, manifest), procs)
            follow_websocket(procs, env, rpc_url)
            _latency(result, rx, ports[:LATENCY_ENDPOINTS], (rpc_url, manifest), procs, "W")
            delete([(api, hook) for hook in hooks])
            live = ports[: ENDPOINTS - 1]
            hooks = [register(port, wallets=[f"0x{j + 1:040x}"]) for j, port in enumerate(live)]
            merged: dict[str, list[float]] = {"A": [], "B": []}
            dead: list[tuple[requests.Session, str]] = []
            for k, side in enumerate("ABBA", 1):
                if side == "B" and not dead:
                    for i, port in enumerate(silent):
                        via = silent_keys[i // SILENT_PER_KEY]
                        wallet = f"0x{i % len(live) + 1:040x}"
                        dead.append((via, register(port, via, wallets=[wallet])))
                elif side == "A" and dead:
                    delete(dead)
                    dead = []
                got = _burst(rx, live, db_url, manifest, f"evt_bench_{k}_", procs, EVENTS)
                merged[side] += got
                row = [str(len(got)), f"{max(got):.1f}", f"{len(got) / max(got):.0f}"]
                label = f"({k}) {side}: 49" + " + 100 never answering" * (side == "B")
                count = len(live) + len(silent) * (side == "B")
                result.rows.append([label, str(count), *row, *quantiles(got)])
            register(ports[-1], wallets=[f"0x{ENDPOINTS:040x}"])
            got = _burst(rx, ports, db_url, manifest, "evt_bench_c_", procs, THROUGHPUT_EVENTS)
            rate = len(got) / max(got)
            row = [str(len(got)), f"{max(got):.1f}", f"{rate:.0f}", *quantiles(got)]
            result.rows.append([f"(c) {ENDPOINTS} answering", str(ENDPOINTS), *row])
    p95 = {side: percentile(got, 0.95) for side, got in merged.items()}
    description = f"(b) the 49's p95 with 100 never answering within {MAX_RATIO:g}x of without"
    ratio, detail = p95["B"] / p95["A"], f"{p95['B']:.2f} s / {p95['A']:.2f} s"
    result.target(description, ratio, f"{detail} = {ratio:.2f}x", at_most=MAX_RATIO)
    description = f"(c) deliveries/s to {ENDPOINTS} answering endpoints at least {TARGET_RATE:,}"
    result.target(description, rate, f"{rate:.0f}/s", at_least=TARGET_RATE)
    result.notes.append(__doc__.split("\n", 4)[4])


# Vacuumed before each burst: what autovacuum does between bursts minutes apart, which this
# machine's PostgreSQL does not (it runs with autovacuum off), so that a burst is not measured
# through the dead rows of the ones before it. What a burst leaves during itself stays.
VACUUMED = ("webhooks_delivery", "webhooks_attempt", "webhooks_outboxevent", "webhooks_endpoint")


def _burst(rx: Receivers, ports: list[int], db_url: str, manifest: dict, prefix: str, procs, n):
    """`n` events into the outbox at once: seconds from the commit to each POST received."""
    with dataset.connect(db_url, autocommit=True) as conn:
        for table in VACUUMED:
            conn.execute(f"VACUUM ANALYZE {table}")
    with dataset.connect(db_url) as conn:
        (lat,) = conn.execute("SELECT id FROM lats_lat WHERE symbol = 'latETH'").fetchone()
        args = {"lat": lat, "address": manifest["proxyAddress"], "n": n, "k": ENDPOINTS}
        conn.execute(INSERT, {**args, "run": prefix})
        conn.execute("NOTIFY lat_webhooks")
    committed, want = time.monotonic(), n // ENDPOINTS * len(ports)
    if not wait_until(lambda: len(rx.since(ports, prefix, committed)) >= want, 1800, procs.dead, 1):
        raise RuntimeError(f"{prefix}: not every event delivered within 1800 s")
    return rx.since(ports, prefix, committed)


def _latency(
    result: SectionResult, rx: Receivers, ports: list[int], chain: tuple, procs, run: str = ""
) -> None:
    """A warm-up deposit until every endpoint got it, then the DEPOSITS: (a)'s row and target
    (`run` "W": the follower has WS_URL set)."""
    from devchain.devnet import make_deposits

    (url, manifest), made = chain, []

    def deposit() -> tuple[tuple[str, ...], float]:
        done = make_deposits(url, manifest, 12, [manifest["tokens"][0]["address"]], [10**18])
        while int(rpc(url, "eth_blockNumber"), 16) < done["blockNumber"] + 2:
            rpc(url, "evm_mine")
        logs = rpc(url, "eth_getTransactionReceipt", done["txHash"])["logs"]
        return tuple(_event_id(log) for log in logs), time.monotonic()

    def reached(prefix: tuple[str, ...], confirmed: float = 0.0) -> list[float | None]:
        return [min(rx.since([port], prefix, confirmed), default=None) for port in ports]

    warmup = deposit()[0]
    if not wait_until(lambda: None not in reached(warmup), 120, procs.dead, 0.05):
        raise RuntimeError("the warm-up deposit did not reach every endpoint within 120 s")
    time.sleep(2.0)  # the follower's work after it (state, snapshot) done
    for _ in range(DEPOSITS):
        made.append(deposit())
        time.sleep(1.0)
    wait_until(lambda: all(None not in reached(p) for p, _ in made), 30, procs.dead, 0.05)
    samples = [s for prefix, confirmed in made for s in reached(prefix, confirmed)]
    got = [s for s in samples if s is not None]
    name, count = f"(a){' ' + run if run else ''}", f"{len(got)}/{len(samples)}"
    label = f"{name}{', WS_URL set:' if run else ''} {DEPOSITS} deposits, from confirmation"
    result.rows.append([label, str(len(ports)), count, "-", "-", *quantiles(got)])
    if len(got) < len(samples):
        result.failures.append(f"{name}: {len(samples) - len(got)} deliveries never received")
    p95, limit = percentile(got, 0.95) if got else float("inf"), TARGET_P95_W if run else TARGET_P95
    description = f"{name} first attempt p95 at most {limit:g} s from confirmation"
    result.target(description, p95, f"p95 {p95:.2f} s", at_most=limit)
