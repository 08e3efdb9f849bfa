"""Section `faults`: the read endpoints, loaded together, while Redis is stopped, paused (SIGSTOP:
accepts, never answers), and up while SIM_CLIENTS clients POST simulate-deposit against a node
that accepts connections and never answers; beside the two Redis up phases around them.

Its own gunicorn (gthread workers: the simulations' in-flight bound only protects the reads when
a worker has threads left for them) and its own redis-server, never the machine's.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import statistics
import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor

from bench import load
from bench.context import HOST, Context, Processes, SectionResult, Server, stop, wait_until
from bench.dataset import CHAIN_ID, LATS, address
from bench.load import LoadResult
from bench.sections.api import endpoints, smoke
from devchain.anvil import free_port

TITLE = "Read endpoints under faults: Redis stopped or paused, a dead node under simulation"
READS = ("lat list", "lat detail", "deposits first page")
HEALTHY = ("Redis up", "Redis up (again)")
MAX_REDIS_FACTOR = 1.5  # p50 and p99 with Redis down, over Redis up
MAX_DEAD_NODE_P99_FACTOR = 2.0  # reads' p99 while simulations hang, over healthy
SIM_CLIENTS = 4
READ_THREADS = 4  # threads per worker beyond SIMULATE_MAX_IN_FLIGHT, left for the reads
SIMULATE_EXPECTED = {429, 500}  # a dead node's answers: in-flight bound, deadline
COLUMNS = ["phase", "endpoint", "requests", "p50 ms", "p99 ms", "max ms", "errors"]
COLUMNS += ["p50 vs up", "p99 vs up"]


def _redis(procs: Processes, port: int) -> None:
    """(Re)start redis-server on 127.0.0.1 and `port`, no persistence, until it answers PING."""
    if shutil.which("redis-server") is None:
        raise RuntimeError("redis-server is not installed")
    cmd = ["redis-server", "--port", str(port), "--bind", HOST, "--save", ""]
    procs.start("redis", [*cmd, "--appendonly", "no", "--dir", str(procs.dir)], dict(os.environ))

    def pong() -> bool:
        with socket.create_connection((HOST, port), 0.5) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")

    if not wait_until(pong, 10.0, procs.dead, every=0.1):
        raise RuntimeError(f"redis-server on port {port} did not answer PING")


@contextlib.contextmanager
def _simulating(server: Server, path: str, timeout: float) -> Iterator[list[Future]]:
    """SIM_CLIENTS clients POSTing a deposit to simulate back to back (a 429 is retried at once)
    until the block ends; each client's result is the (status, seconds) of its answers."""
    sender, asset = address("faults:sender"), address(f"token:{LATS[0].tokens[0]}")
    deposit = {"assets": [asset], "amounts": [str(10**18)], "receiver": sender, "sender": sender}
    body, done = json.dumps(deposit).encode(), threading.Event()
    with ThreadPoolExecutor(SIM_CLIENTS) as pool:
        job = (HOST, server.port, path, body, lambda _: done.is_set(), timeout + 10)
        clients = [pool.submit(load.closed_loop, *job) for _ in range(SIM_CLIENTS)]
        try:
            yield clients
        finally:
            done.set()


def run(ctx: Context, result: SectionResult) -> None:
    result.columns = COLUMNS
    paths = {name: path for name, path in endpoints(ctx).items() if name in READS}
    # The server's own values (it gets the same environment; the defaults are settings.py's).
    timeout = float(ctx.env.get("SIMULATE_TIMEOUT", "5"))
    in_flight = int(ctx.env.get("SIMULATE_MAX_IN_FLIGHT", "4"))
    retry_after = float(ctx.env.get("REDIS_RETRY_AFTER", "5"))
    phases: dict[str, list[LoadResult]] = {}
    answers: list[tuple[int, float]] = []
    try:
        _phases(ctx, result, paths, (timeout, in_flight, retry_after), phases, answers)
    except Exception as exc:  # a broken setup is a failure line; the figures so far stay
        result.failures.append(f"faults: {type(exc).__name__}: {exc}")
    _tabulate(result, paths, phases)
    if "dead node" in phases:
        _simulate_figures(result, answers, timeout)
    args = ctx.args
    result.notes.append(
        f"\n  gunicorn: {args.workers} gthread workers x {in_flight + READ_THREADS} threads "
        f"(SIMULATE_MAX_IN_FLIGHT {in_flight} + {READ_THREADS} for the reads); SIMULATE_TIMEOUT "
        f"{timeout:g} s; REDIS_RETRY_AFTER {retry_after:g} s; the three endpoints loaded together, "
        f"{max(1, args.connections // len(READS))} connections each, {args.duration:g} s "
        f"per phase (warm-up {args.warmup:g} s before the first only: the fault phases "
        f"include their first requests); {args.deposits:,} deposits. 'vs up' and the "
        "targets: over the mean of the two Redis up phases (the healthy figures)."
    )
    usages = {name: loads[0].cpu for name, loads in phases.items()}
    result.warn_busy(usages, "latencies are disturbed")


def _phases(ctx, result, paths, limits, phases, answers) -> None:
    """The phases' loads into `phases`, the simulations' answers into `answers`."""
    timeout, in_flight, retry_after = limits
    port, redis_pids = free_port(), lambda: {"redis": [procs.procs["redis"].pid]}
    with contextlib.ExitStack() as stack:
        procs = stack.enter_context(Processes(ctx.log))
        _redis(procs, port)
        dead = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
        dead.bind((HOST, 0))
        dead.listen(1024)  # never accept()ed: the requests sit in the socket buffers
        node_url = f"http://{HOST}:{dead.getsockname()[1]}"
        server = stack.enter_context(
            ctx.server(
                threads=in_flight + READ_THREADS, REDIS_URL=f"redis://{HOST}:{port}/0",
                RPC_URL=node_url, **{f"RPC_URL_{CHAIN_ID}": node_url},
                SIMULATE_TIMEOUT=f"{timeout:g}", SIMULATE_MAX_IN_FLIGHT=str(in_flight),
                RATE_LIMIT_SIMULATE="1000000000/s",  # 429s only from the in-flight bound
            )
        )  # fmt: skip
        for name, path in paths.items():
            if problem := smoke(ctx, name, *server.get(path)):
                raise RuntimeError(f"smoke check: {problem}")
        urls, started = [server.url(path) for path in paths.values()], time.monotonic()

        def phase(name: str, warmup: float = 0) -> None:
            phases[name] = ctx.measure(urls, warmup=warmup, pids=redis_pids())
            figures = (
                f"{n} p50 {r.p50_ms:.1f} p99 {r.p99_ms:.1f} ms {r.errors} err"
                for n, r in zip(paths, phases[name], strict=True)
            )
            ctx.log(f"faults: {name}: {', '.join(figures)} ({time.monotonic() - started:.0f} s)")

        # After Redis comes back each worker's breaker waits REDIS_RETRY_AFTER before it tries
        # again: load long enough that every worker is back on Redis.
        recover = {"duration": max(ctx.args.warmup, retry_after + 1), "connections": 1}
        phase("Redis up", ctx.args.warmup)
        stop(procs.procs["redis"])
        phase("Redis stopped")
        _redis(procs, port)
        load.run(urls, tool=ctx.args.loadgen, **recover)
        procs.procs["redis"].send_signal(signal.SIGSTOP)
        phase("Redis paused")
        procs.procs["redis"].send_signal(signal.SIGCONT)
        load.run(urls, tool=ctx.args.loadgen, **recover)
        lat = ctx.dataset().primary_lat
        with _simulating(server, f"/lat/{lat}/simulate-deposit", timeout) as clients:
            time.sleep(1.0)  # every client waits on the node
            phase("dead node")
        answers += [answer for client in clients for answer in client.result()]
        phase("Redis up (again)")  # how far the machine drifted since "Redis up"
        for name, loads in phases.items():
            for endpoint, measured in zip(paths, loads, strict=True):
                result.check(f"{name}, {endpoint}", measured, server)


def _ratio(a: float, b: float) -> float:
    return a / b if b else float("inf")


def _tabulate(result: SectionResult, paths: dict[str, str], phases: dict) -> None:
    """The rows, and the targets against the healthy reference of each endpoint: the mean of
    the two Redis up phases' percentiles."""
    healthy = [phases[name] for name in HEALTHY if name in phases]
    for name, loads in phases.items():
        for i, (endpoint, r) in enumerate(zip(paths, loads, strict=True)):
            up50, up99 = (
                statistics.mean(getattr(h[i], q) for h in healthy) for q in ("p50_ms", "p99_ms")
            )
            r50, r99 = _ratio(r.p50_ms, up50), _ratio(r.p99_ms, up99)
            row = [name, endpoint, f"{r.requests:,}", f"{r.p50_ms:.2f}", f"{r.p99_ms:.2f}"]
            result.rows.append(
                [*row, f"{r.max_ms:.0f}", str(r.errors), f"{r50:.2f}x", f"{r99:.2f}x"]
            )
            p99 = f"p99 {r99:.2f}x ({r.p99_ms:.2f} vs {up99:.2f} ms), {r.errors} errors"
            if name in ("Redis stopped", "Redis paused"):
                result.target(
                    f"{name}: {endpoint} p50 and p99 within {MAX_REDIS_FACTOR:g}x of Redis up, "
                    "no errors", max(r50, r99), f"p50 {r50:.2f}x ({r.p50_ms:.2f} vs {up50:.2f} "
                    f"ms), {p99}", at_most=MAX_REDIS_FACTOR, also=not r.errors,
                )  # fmt: skip
            elif name == "dead node":
                result.target(
                    f"dead node, {SIM_CLIENTS} clients simulating: {endpoint} p99 within "
                    f"{MAX_DEAD_NODE_P99_FACTOR:g}x of healthy, no errors", r99,
                    p99.removeprefix("p99 "), at_most=MAX_DEAD_NODE_P99_FACTOR, also=not r.errors,
                )  # fmt: skip


def _simulate_figures(result: SectionResult, answers: list[tuple[int, float]], timeout: float):
    """The simulate-deposit row, its target, and a failure for any unexpected answer."""
    if not answers:
        result.target("simulate-deposit answers a dead node", 0, "no answer", also=False)
        return
    statuses = Counter(status for status, _ in answers)
    seconds = sorted(s for _, s in answers)
    gave_up = sorted(s for status, s in answers if status == 500)
    counts = ", ".join(
        f"{n} x {status or 'socket error'}" for status, n in sorted(statuses.items())
    )
    p50, top = (f"{x * 1000:.0f}" for x in (statistics.median(seconds), seconds[-1]))
    name = f"simulate-deposit x{SIM_CLIENTS}"
    result.rows.append(["dead node", name, f"{len(answers):,}", p50, "-", top, "-", "", ""])
    limit = timeout + 1
    detail = (
        f"500s p50 {statistics.median(gave_up):.2f} s, max {gave_up[-1]:.2f} s; "
        if gave_up
        else "no 500; "
    )
    description = (
        f"simulate-deposit answers a dead node within SIMULATE_TIMEOUT + 1 s ({limit:g} s)"
    )
    detail += f"all answers max {seconds[-1]:.2f} s ({counts})"
    result.target(description, seconds[-1], detail, at_most=limit, also=bool(gave_up))
    unexpected = {s: n for s, n in statuses.items() if s not in SIMULATE_EXPECTED}
    if unexpected:
        result.failures.append(
            f"simulate-deposit against a dead node: unexpected answers {unexpected} "
            "(expected 500 past the deadline or 429 from the in-flight bound)"
        )
