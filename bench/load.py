"""Closed-loop HTTP load on 127.0.0.1, and who used the CPUs meanwhile.

Two generators give the same `LoadResult`: wrk driven by bench/wrk_report.lua (it caps the
requests, counts every answer that is not 200 and can POST a JSON body), or a Python one of the
same design, a process per connection looping over `http.client` (keep-alive when the server
allows it). Latency runs from sending the request to reading the whole answer.
"""

from __future__ import annotations

import http.client
import json
import math
import multiprocessing
import os
import resource
import statistics
import subprocess
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

WRK_SCRIPT = Path(__file__).with_name("wrk_report.lua")
TICK = os.sysconf("SC_CLK_TCK")


@dataclass
class CpuUsage:
    seconds: float  # wall time
    ours: float  # CPU seconds of the bench's processes
    others: float  # CPU seconds of everything else
    groups: dict[str, float]  # CPU seconds by group of the bench's processes, and "loadgen"

    @property
    def other_cores(self) -> float:
        return self.others / self.seconds if self.seconds else 0.0

    def cores(self, group: str) -> float:
        return self.groups.get(group, 0.0) / self.seconds if self.seconds else 0.0


@dataclass
class LoadResult:
    url: str
    connections: int
    seconds: float
    requests: int
    non200: int
    socket_errors: int  # connect, read, write errors and timeouts
    p50_ms: float
    p90_ms: float
    p99_ms: float
    max_ms: float
    max_requests: int
    cpu: CpuUsage | None = None  # the measured run's, filled in by Context.measure

    @property
    def rps(self) -> float:
        return self.requests / self.seconds if self.seconds > 0 else 0.0

    @property
    def errors(self) -> int:
        return self.non200 + self.socket_errors

    @property
    def capped(self) -> bool:
        return 0 < self.max_requests <= self.requests

    def summary(self) -> str:
        """One progress line's figures."""
        other = f"{self.cpu.other_cores:.2f}" if self.cpu else "?"
        return (
            f"{self.rps:,.0f} req/s, p50 {self.p50_ms:.2f} ms, p99 {self.p99_ms:.2f} ms, "
            f"{self.errors} errors, other CPU {other} cores"
        )


def percentile(values: list[float], q: float) -> float:
    """Nearest rank: the smallest value with at least q of the values at or below it."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def merge(loads: list[LoadResult]) -> LoadResult:
    """One result of several runs of one URL: requests, errors and seconds summed, the median of
    the runs' percentiles (percentiles of different runs cannot be merged exactly)."""
    summed = (sum(getattr(r, k) for r in loads) for k in ("seconds", "requests", "non200"))
    ms = (statistics.median(getattr(r, f"p{q}_ms") for r in loads) for q in (50, 90, 99))
    first, caps = loads[0], sum(r.max_requests for r in loads)
    errors = sum(r.socket_errors for r in loads)
    return LoadResult(
        first.url, first.connections, *summed, errors, *ms, max(r.max_ms for r in loads), caps
    )


def run(urls: list[str], *, tool: str, body: bytes | None = None, **settings) -> list[LoadResult]:
    """Load the URLs at the same time, `connections` each, for `duration` seconds (or until
    `max_requests` each, 0 = no cap; `threads` for wrk): GET, or POST of `body` as JSON."""
    for url in urls:
        if urlsplit(url).hostname not in {"127.0.0.1", "localhost", "::1"}:
            raise ValueError(f"load is only ever sent to the local machine, not to {url!r}")
    one = _wrk if tool == "wrk" else _python
    settings = {"max_requests": 0, "threads": 1, **settings}
    with ThreadPoolExecutor(len(urls)) as pool:
        return list(pool.map(lambda url: one(url, body, **settings), urls))


def _wrk(url, body, *, duration, connections, max_requests, threads) -> LoadResult:
    threads = max(1, min(threads, connections))
    cap = math.ceil(max_requests / threads) if max_requests else 0
    cmd = ["wrk", f"-t{threads}", f"-c{connections}", f"-d{max(1, round(duration))}s"]
    cmd += ["--timeout", "10s", "-s", str(WRK_SCRIPT), url, "--", str(cap)]
    cmd += [body.decode()] if body is not None else []
    out = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=duration + 60)
    line = next((x for x in out.stdout.splitlines() if x.startswith("BENCH_JSON ")), None)
    if out.returncode != 0 or line is None:
        raise RuntimeError(f"wrk failed ({out.returncode}):\n{out.stdout}\n{out.stderr}")
    data = json.loads(line.removeprefix("BENCH_JSON "))
    ms = [data[f"{key}_us"] / 1000 for key in ("p50", "p90", "p99", "max")]
    socket = sum(data[key] for key in ("connect_errors", "read_errors", "write_errors", "timeouts"))
    # A run stopped at the cap: wrk reports -d anyway; the script measured the real time.
    seconds = (data["capped_duration_us"] or data["duration_us"]) / 1e6
    counts = (data["requests"], data["non200"], socket)
    return LoadResult(url, connections, seconds, *counts, *ms, max_requests)


def closed_loop(host, port, path, body, until, timeout=10.0) -> list[tuple[int, float]]:
    """One connection in a closed loop, GET (POST of a JSON `body` if any), until
    `until(answers)`: the (status, seconds) of every answer, status 0 for a socket error."""
    answers: list[tuple[int, float]] = []
    headers = {"Host": host} | ({"Content-Type": "application/json"} if body else {})
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    while not until(answers):
        started = time.perf_counter()
        try:
            conn.request("GET" if body is None else "POST", path, body=body, headers=headers)
            response = conn.getresponse()
            response.read()
            status = response.status
        except (OSError, http.client.HTTPException):
            status = 0
            conn.close()  # http.client reconnects on the next request
        answers.append((status, time.perf_counter() - started))
    conn.close()
    return answers


def _until(job: tuple) -> list[tuple[int, float]]:
    """closed_loop in a worker process, until the deadline or the cap of answers."""
    *where, deadline, cap = job
    return closed_loop(*where, lambda answers: time.time() >= deadline or 0 < cap <= len(answers))


def _python(url, body, *, duration, connections, max_requests, threads) -> LoadResult:
    parts = urlsplit(url)
    path = parts.path + (f"?{parts.query}" if parts.query else "")
    cap = math.ceil(max_requests / connections) if max_requests else 0
    with multiprocessing.get_context("fork").Pool(connections) as pool:
        started = time.time()
        job = (parts.hostname, parts.port or 80, path, body, started + duration, cap)
        answers = [answer for part in pool.map(_until, [job] * connections) for answer in part]
        seconds = time.time() - started
    latencies = sorted(s for status, s in answers if status)  # socket errors have none
    ms = [percentile(latencies, q) * 1000 if latencies else 0.0 for q in (0.5, 0.9, 0.99, 1)]
    non200 = sum(status not in (0, 200) for status, _ in answers)
    counts = (len(latencies), non200, sum(status == 0 for status, _ in answers))
    return LoadResult(url, connections, seconds, *counts, *ms, max_requests)


# --- CPU: the bench's processes, and everyone else ----------------------------------------------


def _stat(pid: int | str) -> list[str]:
    """The fields of /proc/<pid>/stat after the command name (state first), [] if it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return []


def children_of(pid: int) -> list[int]:
    """pid and its descendants."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (fields := _stat(entry.name)):
            parents.setdefault(int(fields[1]), []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        found.append(todo.pop())
        todo.extend(parents.get(found[-1], []))
    return found


class CpuMonitor:
    """`with CpuMonitor(groups) as m: ...`, then `m.usage`. `groups` returns {name: pids} (at
    start and end); this process and the children it reaped meanwhile are group "loadgen"."""

    def __init__(self, groups: Callable[[], dict[str, list[int]]]) -> None:
        self._groups, self.usage = groups, None

    def _snapshot(self) -> tuple[float, int, float, dict[str, dict[int, int]]]:
        """Wall clock, busy ticks of the machine, CPU seconds of this process and its reaped
        children, ticks of each group's processes."""
        cpu = Path("/proc/stat").read_text().splitlines()[0].split()[1:9]
        busy = sum(int(x) for i, x in enumerate(cpu) if i not in (3, 4))  # not idle, iowait
        own = sum(
            getattr(resource.getrusage(who), field)
            for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
            for field in ("ru_utime", "ru_stime")
        )
        ticks = {
            name: {p: sum(int(x) for x in _stat(p)[11:13]) for p in pids}  # utime, stime
            for name, pids in self._groups().items()
        }
        return time.monotonic(), busy, own, ticks

    def __enter__(self) -> CpuMonitor:
        self._start = self._snapshot()
        return self

    def __exit__(self, *exc) -> None:
        (wall0, busy0, own0, ticks0), (wall, busy, own, ticks) = self._start, self._snapshot()
        # Processes born during the run count whole; those gone count for nothing (rare).
        groups = {
            name: sum(t - ticks0.get(name, {}).get(pid, 0) for pid, t in pids.items()) / TICK
            for name, pids in ticks.items()
        }
        groups["loadgen"] = own - own0
        ours, others = sum(groups.values()), (busy - busy0) / TICK
        self.usage = CpuUsage(wall - wall0, ours, max(0.0, others - ours), groups)


def wait_quiet(groups: Callable, *, max_other_cores: float, timeout: float) -> float:
    """Wait (at most `timeout` s) until other processes use less than `max_other_cores`;
    returns the last sample's figure."""
    deadline = time.monotonic() + timeout
    while True:
        with CpuMonitor(groups) as monitor:
            time.sleep(0.5)
        other = monitor.usage.other_cores
        if other < max_other_cores or time.monotonic() >= deadline:
            return other
        time.sleep(0.5)
