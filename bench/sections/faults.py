"""Section `faults`: the read endpoints while Redis is down, and while simulate-deposit waits on a
dead node, beside their healthy figures of the same run.

One gunicorn (gthread workers: the simulation in-flight bound only protects the reads when a
worker has threads left for them) on the bench database, with a redis-server of the section's
own (127.0.0.1, a free port, no persistence; the machine's Redis is never touched) and RPC_URL on
a socket that accepts connections (the kernel completes them) and never answers. The three read
endpoints are loaded together in each phase: Redis up; Redis stopped (connections refused);
Redis restarted, then paused with SIGSTOP (accepts, never answers); Redis resumed with
`SIM_CLIENTS` clients POSTing simulate-deposit in a closed loop against the dead node; Redis up
again. The healthy reference is the mean of the two Redis up phases (about 2 minutes in all).
"""

from __future__ import annotations

import contextlib
import http.client
import json
import shutil
import signal
import socket
import statistics
import subprocess
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator

from bench import http_load, server
from bench.context import QUIET_CORES, Context, SectionResult, Target
from bench.cpu import CpuMonitor, CpuUsage, children_of, wait_quiet
from bench.dataset import CHAIN_ID, LATS, address
from bench.http_load import LoadResult
from bench.sections.api import _endpoints, _smoke

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


class _Redis:
    """redis-server on 127.0.0.1:`port`, no persistence; start, stop, pause, resume."""

    def __init__(self, port: int, directory: str) -> None:
        self.port, self.directory = port, directory
        self.process: subprocess.Popen | None = None

    def start(self, timeout: float = 10.0) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not installed")
        cmd = [binary, "--port", str(self.port), "--bind", server.HOST, "--dir", self.directory]
        cmd += ["--save", "", "--appendonly", "no"]  # no persistence
        self.process = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.process.poll() is None:
            with contextlib.suppress(OSError):
                with socket.create_connection((server.HOST, self.port), timeout=0.5) as sock:
                    sock.sendall(b"PING\r\n")
                    if sock.recv(16).startswith(b"+PONG"):
                        return
            time.sleep(0.1)
        raise RuntimeError(f"redis-server on port {self.port} did not answer PING")

    def signal(self, signum: int) -> None:
        if self.process and self.process.poll() is None:
            self.process.send_signal(signum)

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGCONT)  # a paused server cannot act on SIGTERM
        self.process.terminate()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=5)


@contextlib.contextmanager
def _dead_node() -> Iterator[str]:
    """A JSON-RPC URL whose connections the kernel accepts and nobody ever answers."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((server.HOST, 0))
        sock.listen(1024)  # never accept()ed: the requests sit in the socket buffers
        yield f"http://{server.HOST}:{sock.getsockname()[1]}"


@contextlib.contextmanager
def _simulating(
    srv: server.Server, path: str, body: bytes, clients: int, timeout: float
) -> Iterator[list[tuple[int, float]]]:
    """`clients` threads POSTing `body` to `path` back to back (a 429 is retried at once);
    yields the (status, seconds) of every answer, 0 for a socket error."""
    answers: list[tuple[int, float]] = []
    stop = threading.Event()

    def loop() -> None:
        conn = http.client.HTTPConnection(srv.host, srv.port, timeout=timeout + 10)
        headers = {"Host": srv.host, "Content-Type": "application/json"}
        while not stop.is_set():
            started = time.perf_counter()
            try:
                conn.request("POST", path, body=body, headers=headers)
                response = conn.getresponse()
                response.read()
                status = response.status
            except (OSError, http.client.HTTPException):
                status = 0
                conn.close()
            answers.append((status, time.perf_counter() - started))
        conn.close()

    threads = [threading.Thread(target=loop, daemon=True) for _ in range(clients)]
    for thread in threads:
        thread.start()
    try:
        yield answers
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout + 15)


def _measure(
    ctx: Context, urls: list[str], groups: Callable[[], dict], warmup: float
) -> tuple[list[LoadResult], CpuUsage | None]:
    """The URLs loaded together (the connections split between them), after a quiet wait and
    `warmup` seconds of discarded load."""
    settings = {
        "duration": ctx.args.duration,
        "connections": max(1, ctx.args.connections // len(urls)),
        "max_requests": ctx.args.max_requests // len(urls),
        "tool": ctx.args.loadgen,
        "threads": ctx.args.threads,
    }
    if ctx.args.quiet_wait > 0:
        wait_quiet(groups, max_other_cores=QUIET_CORES, timeout=ctx.args.quiet_wait)
    if warmup > 0:
        http_load.run_together(urls, **{**settings, "duration": warmup})
    with CpuMonitor(groups) as monitor:
        loads = http_load.run_together(urls, **settings)
    return loads, monitor.usage


def _ratio(a: float, b: float) -> float:
    return a / b if b else float("inf")


def run(ctx: Context) -> SectionResult:
    result = SectionResult(
        name="faults",
        title=TITLE,
        columns=COLUMNS,
    )
    # The server's own values of these (it gets the same environment; defaults of settings.py).
    timeout = float(ctx.env.get("SIMULATE_TIMEOUT", "5"))
    in_flight = int(ctx.env.get("SIMULATE_MAX_IN_FLIGHT", "4"))
    retry_after = float(ctx.env.get("REDIS_RETRY_AFTER", "5"))
    threads = in_flight + READ_THREADS
    paths = {name: path for name, path in _endpoints(ctx) if name in READS}
    lat = ctx.dataset().primary_lat
    sender = address("faults:sender")
    body = json.dumps(
        {
            "assets": [address(f"token:{LATS[0].tokens[0]}")],
            "amounts": ["1000000000000000000"],
            "receiver": sender,
            "sender": sender,
        }
    ).encode()
    phases: dict[str, list[LoadResult]] = {}
    cpu: dict[str, CpuUsage | None] = {}
    answers: list[tuple[int, float]] = []
    started = time.monotonic()
    with contextlib.ExitStack() as stack:
        try:
            redis = _Redis(server.free_port(), stack.enter_context(tempfile.TemporaryDirectory()))
            stack.callback(redis.stop)
            redis.start()
            node_url = stack.enter_context(_dead_node())
            env = ctx.server_env(
                REDIS_URL=f"redis://{server.HOST}:{redis.port}/0",
                RPC_URL=node_url,
                **{f"RPC_URL_{CHAIN_ID}": node_url},
                SIMULATE_TIMEOUT=f"{timeout:g}",
                SIMULATE_MAX_IN_FLIGHT=str(in_flight),
                RATE_LIMIT_SIMULATE="1000000000/s",  # 429s only from the in-flight bound
            )
            srv = stack.enter_context(
                server.gunicorn(env, workers=ctx.args.workers, threads=threads, log=ctx.log)
            )

            def groups() -> dict:
                return {
                    **ctx.bench_pids(),
                    "server": children_of(srv.process.pid),
                    "redis": [redis.process.pid],
                }

            for name, path in paths.items():
                problem = _smoke(name, *srv.get(path), ctx)
                if problem:
                    raise RuntimeError(f"smoke check: {problem}")
            urls = [srv.url(path) for path in paths.values()]

            def phase(name: str, warmup: float) -> None:
                phases[name], cpu[name] = _measure(ctx, urls, groups, warmup)
                ctx.log(
                    f"faults: {name}: "
                    + ", ".join(
                        f"{n} p50 {r.p50_ms:.1f} p99 {r.p99_ms:.1f} ms {r.errors} err"
                        for n, r in zip(paths, phases[name], strict=True)
                    )
                    + f" ({time.monotonic() - started:.0f} s)"
                )

            # After Redis comes back each worker's breaker waits REDIS_RETRY_AFTER before it
            # tries again: load long enough that every worker is back on Redis.
            recover = max(ctx.args.warmup, retry_after + 1)
            phase("Redis up", ctx.args.warmup)
            redis.stop()
            phase("Redis stopped", 0)
            redis.start()
            http_load.run_together(urls, duration=recover, connections=1, tool=ctx.args.loadgen)
            redis.signal(signal.SIGSTOP)
            phase("Redis paused", 0)
            redis.signal(signal.SIGCONT)
            http_load.run_together(urls, duration=recover, connections=1, tool=ctx.args.loadgen)
            simulate = f"/lat/{lat}/simulate-deposit"
            with _simulating(srv, simulate, body, SIM_CLIENTS, timeout) as answers:
                time.sleep(1.0)  # every client waits on the node
                phase("dead node", 0)
            phase("Redis up (again)", 0)  # how far the machine drifted since "Redis up"
            for name, loads in phases.items():
                for endpoint, load in zip(paths, loads, strict=True):
                    if load.errors:
                        result.failures.append(
                            f"{name}, {endpoint}: {load.non200} answers not 200 and "
                            f"{load.socket_errors} socket errors out of {load.requests:,}; "
                            f"server log:\n{srv.log_tail(20)}"
                        )
        except Exception as exc:  # a broken setup is a failure line; the figures so far stay
            result.failures.append(f"faults: {type(exc).__name__}: {exc}")

    # The healthy reference of each endpoint: the mean of the two Redis up phases' percentiles.
    healthy = [phases[name] for name in HEALTHY if name in phases]
    ref = (
        {
            endpoint: (
                statistics.mean(loads[i].p50_ms for loads in healthy),
                statistics.mean(loads[i].p99_ms for loads in healthy),
            )
            for i, endpoint in enumerate(paths)
        }
        if healthy
        else {}
    )
    for name, loads in phases.items():
        for endpoint, load in zip(paths, loads, strict=True):
            up50, up99 = ref[endpoint]
            result.rows.append(
                [
                    name,
                    endpoint,
                    f"{load.requests:,}",
                    f"{load.p50_ms:.2f}",
                    f"{load.p99_ms:.2f}",
                    f"{load.max_ms:.0f}",
                    str(load.errors),
                    f"{_ratio(load.p50_ms, up50):.2f}x",
                    f"{_ratio(load.p99_ms, up99):.2f}x",
                ]
            )
    for name in ("Redis stopped", "Redis paused"):
        for endpoint, load in zip(paths, phases.get(name, []), strict=True):
            up50, up99 = ref[endpoint]
            r50, r99 = _ratio(load.p50_ms, up50), _ratio(load.p99_ms, up99)
            result.targets.append(
                Target(
                    f"{name}: {endpoint} p50 and p99 within {MAX_REDIS_FACTOR:g}x of Redis up, "
                    "no errors",
                    max(r50, r99) <= MAX_REDIS_FACTOR and not load.errors,
                    f"p50 {r50:.2f}x ({load.p50_ms:.2f} vs {up50:.2f} ms), p99 {r99:.2f}x "
                    f"({load.p99_ms:.2f} vs {up99:.2f} ms), {load.errors} errors",
                )
            )
    for endpoint, load in zip(paths, phases.get("dead node", []), strict=True):
        up99 = ref[endpoint][1]
        r99 = _ratio(load.p99_ms, up99)
        result.targets.append(
            Target(
                f"dead node, {SIM_CLIENTS} clients simulating: {endpoint} p99 within "
                f"{MAX_DEAD_NODE_P99_FACTOR:g}x of healthy, no errors",
                r99 <= MAX_DEAD_NODE_P99_FACTOR and not load.errors,
                f"{r99:.2f}x ({load.p99_ms:.2f} vs {up99:.2f} ms), {load.errors} errors",
            )
        )
    if "dead node" in phases:
        _simulate_figures(result, answers, timeout)
    result.notes.append(
        f"\n  gunicorn: {ctx.args.workers} gthread workers x {threads} threads "
        f"(SIMULATE_MAX_IN_FLIGHT {in_flight} + {READ_THREADS} for the reads); SIMULATE_TIMEOUT "
        f"{timeout:g} s; REDIS_RETRY_AFTER {retry_after:g} s; the three endpoints loaded together, "
        f"{max(1, ctx.args.connections // len(READS))} connections each, {ctx.args.duration:g} s "
        f"per phase (warm-up {ctx.args.warmup:g} s before the first only: the fault phases "
        f"include their first requests); {ctx.args.deposits:,} deposits. 'vs up' and the "
        "targets: over the mean of the two Redis up phases (the healthy figures)."
    )
    busy = [n for n, usage in cpu.items() if usage and usage.other_cores > QUIET_CORES]
    if busy:
        result.notes.append(
            f"WARNING: other processes took > {QUIET_CORES} cores during: {', '.join(busy)}; "
            "those latencies are disturbed. Rerun on a quiet machine."
        )
    return result


def _simulate_figures(result: SectionResult, answers: list[tuple[int, float]], timeout: float):
    """The simulate-deposit row, its target, and a failure for any unexpected answer."""
    if not answers:
        result.targets.append(Target("simulate-deposit answers a dead node", False, "no answer"))
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
    result.targets.append(
        Target(
            f"simulate-deposit answers a dead node within SIMULATE_TIMEOUT + 1 s ({limit:g} s)",
            bool(gave_up) and seconds[-1] <= limit,
            detail + f"all answers max {seconds[-1]:.2f} s ({counts})",
        )
    )
    unexpected = {s: n for s, n in statuses.items() if s not in SIMULATE_EXPECTED}
    if unexpected:
        result.failures.append(
            f"simulate-deposit against a dead node: unexpected answers {unexpected} "
            "(expected 500 past the deadline or 429 from the in-flight bound)"
        )
