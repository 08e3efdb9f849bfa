"""Closed-loop HTTP load against one URL on 127.0.0.1: a fixed duration, a bounded number of
requests, a fixed number of concurrent connections; requests/second and latency percentiles.

Two generators give the same `LoadResult`:

- `wrk` (when on PATH), driven by bench/wrk_report.lua, which caps the
  requests and counts every answer that is not 200;
- a Python fallback: one process per connection, each looping GET over `http.client` with
  keep-alive when the server allows it, timing every request with `perf_counter`.

Latency is measured by the client from sending the request to reading the whole answer, so it
includes time queued behind other connections when there are more connections than workers.
"""

from __future__ import annotations

import http.client
import json
import math
import multiprocessing
import shutil
import subprocess
import time
from array import array
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from bench.cpu import CpuUsage

WRK_SCRIPT = Path(__file__).with_name("wrk_report.lua")
ALLOWED_HOSTS = {"127.0.0.1", "localhost", "::1"}


@dataclass
class LoadResult:
    url: str
    tool: str
    connections: int
    duration_s: float
    requests: int
    non200: int
    socket_errors: int  # connect, read, write errors and timeouts
    p50_ms: float
    p90_ms: float
    p99_ms: float
    mean_ms: float
    max_ms: float
    max_requests: int
    cpu: CpuUsage | None = None  # filled in by bench.context.Context.load

    @property
    def rps(self) -> float:
        return self.requests / self.duration_s if self.duration_s > 0 else 0.0

    @property
    def errors(self) -> int:
        return self.non200 + self.socket_errors

    @property
    def capped(self) -> bool:
        return 0 < self.max_requests <= self.requests


def wrk_available() -> bool:
    return shutil.which("wrk") is not None


def wrk_version() -> str:
    if not wrk_available():
        return "absent"
    out = subprocess.run(["wrk", "--version"], capture_output=True, text=True, check=False)
    return (out.stdout or out.stderr).strip().splitlines()[0]


def _check_local(url: str) -> None:
    host = urlsplit(url).hostname
    if host not in ALLOWED_HOSTS:
        raise ValueError(f"load is only ever sent to the local machine, not to {host!r}")


def run(
    url: str,
    *,
    duration: float,
    connections: int,
    max_requests: int = 0,
    tool: str = "auto",
    threads: int = 1,
) -> LoadResult:
    """Load `url` for `duration` seconds (or until `max_requests`, 0 = no cap)."""
    _check_local(url)
    if tool == "auto":
        tool = "wrk" if wrk_available() else "python"
    if tool == "wrk":
        return _run_wrk(url, duration, connections, max_requests, threads)
    if tool == "python":
        return _run_python(url, duration, connections, max_requests)
    raise ValueError(f"unknown load generator {tool!r}")


def run_together(urls: list[str], **settings) -> list[LoadResult]:
    """Load several URLs at the same time, one generator each (`connections` apiece).

    For comparisons that must not depend on when they ran: both sides see the same machine.
    """
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(len(urls)) as pool:
        return list(pool.map(lambda url: run(url, **settings), urls))


# --- wrk ------------------------------------------------------------------------------------


def _run_wrk(
    url: str, duration: float, connections: int, max_requests: int, threads: int
) -> LoadResult:
    threads = max(1, min(threads, connections))
    cap_per_thread = math.ceil(max_requests / threads) if max_requests else 0
    cmd = [
        "wrk",
        f"-t{threads}",
        f"-c{connections}",
        f"-d{max(1, round(duration))}s",
        "--timeout",
        "10s",
        "-s",
        str(WRK_SCRIPT),
        url,
        "--",
        str(cap_per_thread),
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=duration + 60)
    line = next((line for line in out.stdout.splitlines() if line.startswith("BENCH_JSON ")), None)
    if out.returncode != 0 or line is None:
        raise RuntimeError(f"wrk failed ({out.returncode}):\n{out.stdout}\n{out.stderr}")
    data = json.loads(line.removeprefix("BENCH_JSON "))
    return LoadResult(
        url=url,
        tool="wrk",
        connections=connections,
        # A run stopped at the cap: wrk reports -d anyway; the script measured the real time.
        duration_s=(data["capped_duration_us"] or data["duration_us"]) / 1e6,
        requests=data["requests"],
        non200=data["non200"],
        socket_errors=data["connect_errors"]
        + data["read_errors"]
        + data["write_errors"]
        + data["timeouts"],
        p50_ms=data["p50_us"] / 1000,
        p90_ms=data["p90_us"] / 1000,
        p99_ms=data["p99_us"] / 1000,
        mean_ms=data["mean_us"] / 1000,
        max_ms=data["max_us"] / 1000,
        max_requests=max_requests,
    )


# --- Python fallback --------------------------------------------------------------------------


def _py_worker(
    args: tuple[str, int, str, float, int] | tuple[str, int, str, float, int, bytes],
) -> tuple[array, int, int]:
    """One keep-alive connection in a closed loop: GET, or POST of a JSON body when the job
    carries one."""
    host, port, path, deadline, cap, *rest = args
    body = rest[0] if rest else None
    latencies = array("d")
    non200 = errors = 0
    conn = http.client.HTTPConnection(host, port, timeout=10)
    headers = {"Host": host}
    if body is not None:
        headers["Content-Type"] = "application/json"
    method = "GET" if body is None else "POST"
    while time.time() < deadline and (cap == 0 or len(latencies) < cap):
        started = time.perf_counter()
        try:
            conn.request(method, path, body=body, headers=headers)
            response = conn.getresponse()
            response.read()
        except (OSError, http.client.HTTPException):
            errors += 1
            conn.close()
            conn = http.client.HTTPConnection(host, port, timeout=10)
            continue
        latencies.append(time.perf_counter() - started)
        if response.status != 200:
            non200 += 1
        if response.will_close:
            conn.close()  # http.client reconnects on the next request
    conn.close()
    return latencies, non200, errors


def _percentile(ordered: list[float], q: float) -> float:
    if not ordered:
        return 0.0
    rank = max(0, min(len(ordered) - 1, math.ceil(q / 100 * len(ordered)) - 1))
    return ordered[rank]


def python_result(
    url: str, connections: int, elapsed: float, results: list, max_requests: int
) -> LoadResult:
    """A LoadResult from the Python workers' (latencies, non-200s, socket errors) tuples."""
    latencies = sorted(x for lat, _, _ in results for x in lat)
    return LoadResult(
        url=url,
        tool="python",
        connections=connections,
        duration_s=elapsed,
        requests=len(latencies),
        non200=sum(n for _, n, _ in results),
        socket_errors=sum(e for _, _, e in results),
        p50_ms=_percentile(latencies, 50) * 1000,
        p90_ms=_percentile(latencies, 90) * 1000,
        p99_ms=_percentile(latencies, 99) * 1000,
        mean_ms=(sum(latencies) / len(latencies) * 1000) if latencies else 0.0,
        max_ms=(latencies[-1] * 1000) if latencies else 0.0,
        max_requests=max_requests,
    )


def _run_python(url: str, duration: float, connections: int, max_requests: int) -> LoadResult:
    parts = urlsplit(url)
    path = parts.path + (f"?{parts.query}" if parts.query else "")
    cap = math.ceil(max_requests / connections) if max_requests else 0
    context = multiprocessing.get_context("fork")
    with context.Pool(connections) as pool:
        started = time.time()
        deadline = started + duration
        jobs = [(parts.hostname, parts.port or 80, path, deadline, cap)] * connections
        results = pool.map(_py_worker, jobs)
        elapsed = time.time() - started
    return python_result(url, connections, elapsed, results, max_requests)
