"""Closed-loop HTTP load on 127.0.0.1 with wrk (bench/wrk_report.lua), and who used the CPUs."""

from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")
SCRIPT = str(Path(__file__).with_name("wrk_report.lua"))


@dataclass
class CpuUsage:
    seconds: float  # wall time
    ours: float  # CPU seconds of the bench's processes
    others: float  # CPU seconds of everything else
    groups: dict[str, float]  # CPU seconds by group of the bench's processes, and "loadgen"

    @property
    def other_cores(self) -> float:
        return self.others / self.seconds

    def cores(self, group: str) -> float:
        return self.groups.get(group, 0.0) / self.seconds


@dataclass
class LoadResult:
    url: str
    seconds: float
    requests: int
    errors: int  # answers not 2xx/3xx, socket errors and timeouts
    p50_ms: float
    p90_ms: float
    p99_ms: float
    max_ms: float
    cpu: CpuUsage | None = None  # the measured run's, filled in by Context.measure

    @property
    def rps(self) -> float:
        return self.requests / self.seconds


def percentile(values: list[float], q: float) -> float:
    """Nearest rank: the smallest value with at least q of the values at or below it."""
    return sorted(values)[max(0, math.ceil(q * len(values)) - 1)]


def merge(loads: list[LoadResult]) -> LoadResult:
    """Runs of one URL: seconds, requests and errors summed, the median of their percentiles."""
    sums = [sum(getattr(r, k) for r in loads) for k in ("seconds", "requests", "errors")]
    ms = [statistics.median(getattr(r, f"p{q}_ms") for r in loads) for q in (50, 90, 99)]
    return LoadResult(loads[0].url, *sums, *ms, max(r.max_ms for r in loads))


def run(urls: list[str], *, duration: float, connections: int, body: bytes | None = None):
    """The URLs loaded at the same time, `connections` each: GET, or POST of `body` as JSON."""
    assert all(url.startswith("http://127.0.0.1:") for url in urls), urls  # never another host

    def wrk(url: str) -> LoadResult:
        cmd = ["wrk", "-t1", f"-c{connections}", f"-d{max(1, round(duration))}s", "-s", SCRIPT]
        cmd += ["--timeout", "10s", url, *([body.decode()] if body else [])]
        out = subprocess.run(cmd, capture_output=True, text=True)
        line = next((x for x in out.stdout.splitlines() if x.startswith("BENCH_JSON ")), None)
        if line is None:
            raise RuntimeError(f"wrk failed ({out.returncode}):\n{out.stdout}\n{out.stderr}")
        return LoadResult(url, *json.loads(line.removeprefix("BENCH_JSON ")))

    with ThreadPoolExecutor(len(urls)) as pool:
        return list(pool.map(wrk, urls))


def stat(pid: int | str) -> list[str]:
    """The fields of /proc/<pid>/stat after the command name (state first), [] if it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return []


def ticks(pids) -> dict[int, int]:  # utime + stime of each process, in clock ticks
    return {pid: sum(int(x) for x in stat(pid)[11:13]) for pid in pids}


def children_of(pid: int) -> list[int]:  # pid and its descendants
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (fields := stat(entry.name)):
            parents.setdefault(int(fields[1]), []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        found.append(todo.pop())
        todo.extend(parents.get(found[-1], []))
    return found


class CpuMonitor:
    """`with CpuMonitor(groups) as m: ...`, then `m.usage`. `groups()` gives {name: pids} (at
    start and end); this process and the children it reaped meanwhile are group "loadgen"."""

    def __init__(self, groups) -> None:
        self.groups, self.usage = groups, None

    def snapshot(self):
        cpu = Path("/proc/stat").read_text().split()[1:9]
        busy = sum(int(x) for i, x in enumerate(cpu) if i not in (3, 4))  # not idle, iowait
        own = sum(os.times()[:4])  # this process and its reaped children, user and system
        return time.monotonic(), busy, own, {k: ticks(v) for k, v in self.groups().items()}

    def __enter__(self) -> CpuMonitor:
        self.start = self.snapshot()
        return self

    def __exit__(self, *exc) -> None:
        (wall0, busy0, own0, ticks0), (wall, busy, own, now) = self.start, self.snapshot()
        # Processes born during the run count whole; those gone count for nothing (rare).
        groups = {
            name: sum(t - ticks0.get(name, {}).get(pid, 0) for pid, t in pids.items()) / TICK
            for name, pids in now.items()
        }
        groups["loadgen"] = own - own0
        ours, others = sum(groups.values()), (busy - busy0) / TICK
        self.usage = CpuUsage(wall - wall0, ours, max(0.0, others - ours), groups)
