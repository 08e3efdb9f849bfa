"""Section `faults`: the read endpoints loaded together with Redis stopped and paused (p50 and p99
within 1.5x of Redis up) and while clients simulate deposits on a node that never answers (p99
within 2x; the simulations answered within SIMULATE_TIMEOUT + 1 s)."""

from __future__ import annotations

import signal
import socket
import statistics
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import requests

from bench import dataset, load
from bench.context import HOST, NO_LIMIT, Context, Processes, SectionResult, wait_until
from bench.sections.api import endpoints
from devchain.anvil import free_port

TITLE = "Read endpoints under faults: Redis stopped or paused, a dead node under simulation"
READS = ("lat list", "lat detail", "deposits first page")
MAX_REDIS_FACTOR, MAX_DEAD_NODE_P99_FACTOR = 1.5, 2.0  # over Redis up
SIM_CLIENTS, READ_THREADS = 4, 4  # READ_THREADS: threads a worker has beyond the simulations'
COLUMNS = ["phase", "endpoint", "requests", "p50 ms", "p99 ms", "max ms", "errors"]
COLUMNS += ["p50 vs up", "p99 vs up"]
MS = ("p50_ms", "p99_ms")
SENDER = dataset.address("faults:sender")
DEPOSIT = {"assets": [dataset.TOKEN], "amounts": [str(10**18)], "receiver": SENDER}
DEPOSIT["sender"] = SENDER


def run(ctx: Context, result: SectionResult) -> None:
    result.columns, args = COLUMNS, ctx.args
    paths = {name: path for name, path in endpoints(ctx).items() if name in READS}
    # The server's own values (it gets the same environment; the defaults are settings.py's).
    timeout = float(ctx.env.get("SIMULATE_TIMEOUT", "5"))
    in_flight = int(ctx.env.get("SIMULATE_MAX_IN_FLIGHT", "4"))
    retry_after = float(ctx.env.get("REDIS_RETRY_AFTER", "5"))
    phases, answers = _phases(ctx, result, paths, timeout, in_flight, retry_after)
    healthy = [phases["Redis up"], phases["Redis up (again)"]]
    for name, loads in phases.items():
        for i, (endpoint, r) in enumerate(zip(paths, loads, strict=True)):
            up50, up99 = (statistics.mean(getattr(h[i], k) for h in healthy) for k in MS)
            r50, r99 = r.p50_ms / up50, r.p99_ms / up99
            ms = (f"{r.p50_ms:.2f}", f"{r.p99_ms:.2f}", f"{r.max_ms:.0f}")
            result.rows.append([name, endpoint, f"{r.requests:,}", *ms, str(r.errors)])
            result.rows[-1] += [f"{r50:.2f}x", f"{r99:.2f}x"]
            p99 = f"{r99:.2f}x ({r.p99_ms:.2f} vs {up99:.2f} ms), {r.errors} errors"
            if name in ("Redis stopped", "Redis paused"):
                description = f"{name}: {endpoint} p50 and p99 within {MAX_REDIS_FACTOR:g}x of "
                detail = f"p50 {r50:.2f}x ({r.p50_ms:.2f} vs {up50:.2f} ms), p99 {p99}"
                description += "Redis up, no errors"
                worst, clean = max(r50, r99), not r.errors
                result.target(description, worst, detail, at_most=MAX_REDIS_FACTOR, also=clean)
            elif name == "dead node":
                description = f"dead node, {SIM_CLIENTS} clients simulating: {endpoint} p99 within "
                description += f"{MAX_DEAD_NODE_P99_FACTOR:g}x of healthy, no errors"
                limit = MAX_DEAD_NODE_P99_FACTOR
                result.target(description, r99, p99, at_most=limit, also=not r.errors)
    _simulations(result, answers, timeout)
    result.notes.append(
        f"\n  gunicorn: {args.workers} gthread workers x {in_flight + READ_THREADS} threads "
        f"(SIMULATE_MAX_IN_FLIGHT {in_flight} + {READ_THREADS} for the reads); SIMULATE_TIMEOUT "
        f"{timeout:g} s; REDIS_RETRY_AFTER {retry_after:g} s; the three endpoints loaded together, "
        f"{max(1, args.connections // len(READS))} connections each, {args.duration:g} s per "
        f"phase (warm-up {args.warmup:g} s before the first only); {args.deposits:,} deposits. "
        "'vs up' and the targets: over the mean of the two Redis up phases."
    )
    busy = {name: loads[0].cpu for name, loads in phases.items()}
    result.warn_busy(busy, "latencies are disturbed")


def _simulations(result: SectionResult, answers: list[tuple[int, float]], timeout: float):
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
        result.failures.append(f"simulate-deposit against a dead node: answers {unexpected}")


def _phases(ctx, result, paths, timeout, in_flight, retry_after) -> tuple[dict, list]:
    port, dead = free_port(), socket.socket()
    dead.bind((HOST, 0))
    dead.listen(1024)  # never accept()ed: the requests sit in the socket buffers
    node_url, phases = f"http://{HOST}:{dead.getsockname()[1]}", {}
    env = {"REDIS_URL": f"redis://{HOST}:{port}/0", "RPC_URL": node_url, "RPC_URL_1": node_url}
    env |= {"SIMULATE_TIMEOUT": f"{timeout:g}", "SIMULATE_MAX_IN_FLIGHT": str(in_flight)}
    env["RATE_LIMIT_SIMULATE"] = NO_LIMIT  # 429s only from the in-flight bound
    with dead, Processes(ctx.log) as procs:

        def redis() -> None:  # (re)started, no persistence, until it answers PING
            cmd = ["redis-server", "--port", str(port), "--bind", HOST, "--save", ""]
            procs.start("redis", [*cmd, "--appendonly", "no", "--dir", str(procs.dir)], ctx.env)

            def pong() -> bool:
                with socket.create_connection((HOST, port), 0.5) as sock:
                    sock.sendall(b"PING\r\n")
                    return sock.recv(16).startswith(b"+PONG")

            assert wait_until(pong, 10.0, procs.dead, every=0.1), "redis-server did not answer"

        redis()
        with ctx.server(threads=in_flight + READ_THREADS, **env) as server:
            urls, started = [server.url(path) for path in paths.values()], time.monotonic()
            # After Redis comes back each worker's breaker waits REDIS_RETRY_AFTER before it
            # tries again: load long enough that every worker is back on Redis.
            recover = {"duration": max(ctx.args.warmup, retry_after + 1), "connections": 1}

            def phase(name: str, warmup: float = 0) -> None:
                redis_pid = {"redis": [procs.procs["redis"].pid]}
                phases[name] = ctx.measure(urls, warmup=warmup, pids=redis_pid)
                for endpoint, measured in zip(paths, phases[name], strict=True):
                    result.check(f"{name}, {endpoint}", measured, server)
                ctx.log(f"faults: {name} done ({time.monotonic() - started:.0f} s)")

            phase("Redis up", ctx.args.warmup)
            procs.stop("redis")
            phase("Redis stopped")
            redis()
            load.run(urls, **recover)
            procs.procs["redis"].send_signal(signal.SIGSTOP)
            phase("Redis paused")
            procs.procs["redis"].send_signal(signal.SIGCONT)
            load.run(urls, **recover)
            done, url = threading.Event(), server.url(f"/lat/{dataset.MARKERS[0]}/simulate-deposit")
            with ThreadPoolExecutor(SIM_CLIENTS) as pool:
                clients = [pool.submit(_simulate, url, done, timeout) for _ in range(SIM_CLIENTS)]
                time.sleep(1.0)  # every client waits on the node
                try:
                    phase("dead node")
                finally:
                    done.set()
            answers = [answer for client in clients for answer in client.result()]
            phase("Redis up (again)")  # how far the machine drifted since "Redis up"
    return phases, answers


def _simulate(url: str, done: threading.Event, timeout: float) -> list[tuple[int, float]]:
    """One client POSTing a deposit to simulate until `done`: each answer's status (0 for a
    socket error) and seconds."""
    session, answers = requests.Session(), []
    while not done.is_set():
        began = time.perf_counter()
        try:
            status = session.post(url, json=DEPOSIT, timeout=timeout + 10).status_code
        except requests.RequestException:
            status = 0
        answers.append((status, time.perf_counter() - began))
    return answers
