"""Section `faults`: the read endpoints, loaded together, while Redis is stopped, paused (SIGSTOP:
accepts, never answers), and up while SIM_CLIENTS clients POST simulate-deposit against a node
that accepts connections and never answers; beside the two Redis up phases around them. Its own
gunicorn (gthread: the simulations' in-flight bound only protects the reads when a worker has
threads left for them) and its own redis-server, never the machine's."""

from __future__ import annotations

import os
import signal
import socket
import statistics
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import requests

from bench import load
from bench.context import HOST, NO_LIMIT, Context, Processes, SectionResult, stop, wait_until
from bench.dataset import CHAIN_ID, LATS, address
from bench.sections.api import endpoints, smoke
from devchain.anvil import free_port

TITLE = "Read endpoints under faults: Redis stopped or paused, a dead node under simulation"
READS = ("lat list", "lat detail", "deposits first page")
MAX_REDIS_FACTOR = 1.5  # p50 and p99 with Redis down, over Redis up
MAX_DEAD_NODE_P99_FACTOR = 2.0  # reads' p99 while simulations hang, over healthy
SIM_CLIENTS = 4
READ_THREADS = 4  # threads per worker beyond SIMULATE_MAX_IN_FLIGHT, left for the reads
COLUMNS = ["phase", "endpoint", "requests", "p50 ms", "p99 ms", "max ms", "errors"]
COLUMNS += ["p50 vs up", "p99 vs up"]


def _redis(procs: Processes, port: int) -> None:
    """(Re)start redis-server on `port`, no persistence, until it answers PING."""
    cmd = ["redis-server", "--port", str(port), "--bind", HOST, "--save", "", "--appendonly"]
    procs.start("redis", [*cmd, "no", "--dir", str(procs.dir)], dict(os.environ))

    def pong() -> bool:
        with socket.create_connection((HOST, port), 0.5) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")

    if not wait_until(pong, 10.0, procs.dead, every=0.1):
        raise RuntimeError(f"redis-server on port {port} did not answer PING")


def _simulate(url: str, done: threading.Event, timeout: float) -> list[tuple[int, float]]:
    """One client POSTing a deposit to simulate back to back until `done`: (status, seconds) of
    each answer, status 0 for a socket error."""
    sender, asset = address("faults:sender"), address(f"token:{LATS[0].tokens[0]}")
    deposit = {"assets": [asset], "amounts": [str(10**18)], "receiver": sender, "sender": sender}
    session, answers = requests.Session(), []
    while not done.is_set():
        began = time.perf_counter()
        try:
            status = session.post(url, json=deposit, timeout=timeout + 10).status_code
        except requests.RequestException:
            status = 0
        answers.append((status, time.perf_counter() - began))
    return answers


def run(ctx: Context, result: SectionResult) -> None:
    result.columns, args = COLUMNS, ctx.args
    paths = {name: path for name, path in endpoints(ctx).items() if name in READS}
    # The server's own values (it gets the same environment; the defaults are settings.py's).
    timeout = float(ctx.env.get("SIMULATE_TIMEOUT", "5"))
    in_flight = int(ctx.env.get("SIMULATE_MAX_IN_FLIGHT", "4"))
    retry_after = float(ctx.env.get("REDIS_RETRY_AFTER", "5"))
    phases, answers = {}, []
    try:
        _phases(ctx, result, paths, (timeout, in_flight, retry_after), phases, answers)
    except Exception as exc:  # a broken setup is a failure line; the figures so far stay
        result.failures.append(f"faults: {type(exc).__name__}: {exc}")
    _tabulate(result, paths, phases)
    if "dead node" in phases:
        _simulate_figures(result, answers, timeout)
    result.notes.append(
        f"\n  gunicorn: {args.workers} gthread workers x {in_flight + READ_THREADS} threads "
        f"(SIMULATE_MAX_IN_FLIGHT {in_flight} + {READ_THREADS} for the reads); SIMULATE_TIMEOUT "
        f"{timeout:g} s; REDIS_RETRY_AFTER {retry_after:g} s; the three endpoints loaded together, "
        f"{max(1, args.connections // len(READS))} connections each, {args.duration:g} s per "
        f"phase (warm-up {args.warmup:g} s before the first only); {args.deposits:,} deposits. "
        "'vs up' and the targets: over the mean of the two Redis up phases."
    )
    result.warn_busy(
        {name: loads[0].cpu for name, loads in phases.items()}, "latencies are disturbed"
    )


def _phases(ctx, result, paths, limits, phases, answers) -> None:
    """The phases' loads into `phases`, the simulations' answers into `answers`."""
    timeout, in_flight, retry_after = limits
    port, dead = free_port(), socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    dead.bind((HOST, 0))
    dead.listen(1024)  # never accept()ed: the requests sit in the socket buffers
    node_url, redis_url = f"http://{HOST}:{dead.getsockname()[1]}", f"redis://{HOST}:{port}/0"
    env = {"REDIS_URL": redis_url, "RPC_URL": node_url, f"RPC_URL_{CHAIN_ID}": node_url}
    env |= {"SIMULATE_TIMEOUT": f"{timeout:g}", "SIMULATE_MAX_IN_FLIGHT": str(in_flight)}
    env["RATE_LIMIT_SIMULATE"] = NO_LIMIT  # 429s only from the in-flight bound
    with dead, Processes(ctx.log) as procs:
        _redis(procs, port)
        with ctx.server(threads=in_flight + READ_THREADS, **env) as server:
            for name, path in paths.items():
                if problem := smoke(ctx, name, *server.get(path)):
                    raise RuntimeError(f"smoke check: {problem}")
            urls, started = [server.url(path) for path in paths.values()], time.monotonic()

            def phase(name: str, warmup: float = 0) -> None:
                pids = {"redis": [procs.procs["redis"].pid]}
                phases[name] = ctx.measure(urls, warmup=warmup, pids=pids)
                for endpoint, measured in zip(paths, phases[name], strict=True):
                    result.check(f"{name}, {endpoint}", measured, server)
                ctx.log(f"faults: {name} done ({time.monotonic() - started:.0f} s)")

            # After Redis comes back each worker's breaker waits REDIS_RETRY_AFTER before it
            # tries again: load long enough that every worker is back on Redis.
            recover = {"duration": max(ctx.args.warmup, retry_after + 1), "connections": 1}
            phase("Redis up", ctx.args.warmup)
            stop(procs.procs["redis"])
            phase("Redis stopped")
            _redis(procs, port)
            load.run(urls, **recover)
            procs.procs["redis"].send_signal(signal.SIGSTOP)
            phase("Redis paused")
            procs.procs["redis"].send_signal(signal.SIGCONT)
            load.run(urls, **recover)
            simulate, done = (
                server.url(f"/lat/{ctx.data.primary_lat}/simulate-deposit"),
                threading.Event(),
            )
            with ThreadPoolExecutor(SIM_CLIENTS) as pool:
                clients = [
                    pool.submit(_simulate, simulate, done, timeout) for _ in range(SIM_CLIENTS)
                ]
                time.sleep(1.0)  # every client waits on the node
                try:
                    phase("dead node")
                finally:
                    done.set()
            answers += [answer for client in clients for answer in client.result()]
            phase("Redis up (again)")  # how far the machine drifted since "Redis up"


def _tabulate(result: SectionResult, paths: dict[str, str], phases: dict) -> None:
    """The rows, and the targets against the mean of the two Redis up phases' percentiles."""
    healthy = [phases[name] for name in ("Redis up", "Redis up (again)") if name in phases]
    for name, loads in phases.items():
        for i, (endpoint, r) in enumerate(zip(paths, loads, strict=True)):
            up50 = statistics.mean(h[i].p50_ms for h in healthy)
            up99 = statistics.mean(h[i].p99_ms for h in healthy)
            r50, r99 = r.p50_ms / (up50 or 1e-9), r.p99_ms / (up99 or 1e-9)
            row = [name, endpoint, f"{r.requests:,}", f"{r.p50_ms:.2f}", f"{r.p99_ms:.2f}"]
            result.rows.append(
                [*row, f"{r.max_ms:.0f}", str(r.errors), f"{r50:.2f}x", f"{r99:.2f}x"]
            )
            p99 = f"{r99:.2f}x ({r.p99_ms:.2f} vs {up99:.2f} ms), {r.errors} errors"
            if name in ("Redis stopped", "Redis paused"):
                description = f"{name}: {endpoint} p50 and p99 within {MAX_REDIS_FACTOR:g}x of "
                description += "Redis up, no errors"
                detail = f"p50 {r50:.2f}x ({r.p50_ms:.2f} vs {up50:.2f} ms), p99 {p99}"
                result.target(
                    description, max(r50, r99), detail, at_most=MAX_REDIS_FACTOR, also=not r.errors
                )
            elif name == "dead node":
                description = f"dead node, {SIM_CLIENTS} clients simulating: {endpoint} p99 within "
                description += f"{MAX_DEAD_NODE_P99_FACTOR:g}x of healthy, no errors"
                result.target(
                    description, r99, p99, at_most=MAX_DEAD_NODE_P99_FACTOR, also=not r.errors
                )


def _simulate_figures(result: SectionResult, answers: list[tuple[int, float]], timeout: float):
    """The simulate-deposit row, its target, and a failure for any unexpected answer."""
    if not answers:
        result.target("simulate-deposit answers a dead node", 0, "no answer", also=False)
        return
    statuses, seconds = Counter(s for s, _ in answers), sorted(t for _, t in answers)
    gave_up = sorted(t for s, t in answers if s == 500)
    counts = ", ".join(f"{n} x {s or 'socket error'}" for s, n in sorted(statuses.items()))
    p50, top = (f"{x * 1000:.0f}" for x in (statistics.median(seconds), seconds[-1]))
    row = ["dead node", f"simulate-deposit x{SIM_CLIENTS}", f"{len(answers):,}", p50, "-", top]
    result.rows.append([*row, "-", "", ""])
    detail = "no 500; "
    if gave_up:
        detail = f"500s p50 {statistics.median(gave_up):.2f} s, max {gave_up[-1]:.2f} s; "
    detail += f"all answers max {seconds[-1]:.2f} s ({counts})"
    description = "simulate-deposit answers a dead node within SIMULATE_TIMEOUT + 1 s"
    description += f" ({timeout + 1:g} s)"
    result.target(description, seconds[-1], detail, at_most=timeout + 1, also=bool(gave_up))
    if unexpected := {s: n for s, n in statuses.items() if s not in (429, 500)}:
        result.failures.append(
            f"simulate-deposit against a dead node: unexpected answers {unexpected} "
            "(expected 500 past the deadline or 429 from the in-flight bound)"
        )
