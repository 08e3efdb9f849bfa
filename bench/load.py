"""Closed-loop HTTP load on 127.0.0.1 with wrk (bench/wrk_report.lua: counts every answer that
is not 200, can POST a JSON body), and who used the CPUs meanwhile."""

from __future__ import annotations

import json
import math
import resource
import statistics
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from os import sysconf
from pathlib import Path
from urllib.parse import urlsplit

TICK = sysconf("SC_CLK_TCK")


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
    seconds: float
    requests: int
    non200: int
    socket_errors: int  # connect, read, write errors and timeouts
    p50_ms: float
    p90_ms: float
    p99_ms: float
    max_ms: float
    cpu: CpuUsage | None = None  # the measured run's, filled in by Context.measure

    @property
    def rps(self) -> float:
        return self.requests / self.seconds if self.seconds > 0 else 0.0

    @property
    def errors(self) -> int:
        return self.non200 + self.socket_errors


def percentile(values: list[float], q: float) -> float:
    """Nearest rank: the smallest value with at least q of the values at or below it."""
    return sorted(values)[max(0, math.ceil(q * len(values)) - 1)]


def merge(loads: list[LoadResult]) -> LoadResult:
    """Several runs of one URL: counts and seconds summed, the median of the runs' percentiles."""
    summed = (sum(getattr(r, k) for r in loads) for k in ("seconds", "requests", "non200"))
    ms = (statistics.median(getattr(r, f"p{q}_ms") for r in loads) for q in (50, 90, 99))
    errors, top = sum(r.socket_errors for r in loads), max(r.max_ms for r in loads)
    return LoadResult(loads[0].url, *summed, errors, *ms, top)


def run(urls: list[str], *, duration: float, connections: int, body: bytes | None = None):
    """The URLs loaded at the same time, `connections` each: GET, or POST of `body` as JSON."""
    if any(urlsplit(url).hostname != "127.0.0.1" for url in urls):
        raise ValueError(f"load is only ever sent to the local machine, not to {urls}")
    with ThreadPoolExecutor(len(urls)) as pool:
        return list(pool.map(lambda url: _wrk(url, body, duration, connections), urls))


def _wrk(url: str, body: bytes | None, duration: float, connections: int) -> LoadResult:
    cmd = ["wrk", "-t1", f"-c{connections}", f"-d{max(1, round(duration))}s", "--timeout", "10s"]
    cmd += ["-s", str(Path(__file__).with_name("wrk_report.lua")), url]
    out = subprocess.run(
        cmd + ([body.decode()] if body else []), capture_output=True, text=True, check=False
    )
    line = next((x for x in out.stdout.splitlines() if x.startswith("BENCH_JSON ")), None)
    if out.returncode != 0 or line is None:
        raise RuntimeError(f"wrk failed ({out.returncode}):\n{out.stdout}\n{out.stderr}")
    data = json.loads(line.removeprefix("BENCH_JSON "))
    ms = (data[f"{key}_us"] / 1000 for key in ("p50", "p90", "p99", "max"))
    counts = (data["requests"], data["non200"], data["socket_errors"])
    return LoadResult(url, data["duration_us"] / 1e6, *counts, *ms)


def stat(pid: int | str) -> list[str]:
    """The fields of /proc/<pid>/stat after the command name (state first), [] if it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return []


def ticks(pids) -> dict[int, int]:
    """utime + stime of each process, in clock ticks."""
    return {pid: sum(int(x) for x in stat(pid)[11:13]) for pid in pids}


def children_of(pid: int) -> list[int]:
    """pid and its descendants."""
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
        self._groups, self.usage = groups, None

    def _snapshot(self):
        cpu = Path("/proc/stat").read_text().splitlines()[0].split()[1:9]
        busy = sum(int(x) for i, x in enumerate(cpu) if i not in (3, 4))  # not idle, iowait
        usage = (
            resource.getrusage(resource.RUSAGE_SELF),
            resource.getrusage(resource.RUSAGE_CHILDREN),
        )
        own = sum(u.ru_utime + u.ru_stime for u in usage)
        return time.monotonic(), busy, own, {k: ticks(v) for k, v in self._groups().items()}

    def __enter__(self) -> CpuMonitor:
        self._start = self._snapshot()
        return self

    def __exit__(self, *exc) -> None:
        (wall0, busy0, own0, ticks0), (wall, busy, own, now) = self._start, self._snapshot()
        # Processes born during the run count whole; those gone count for nothing (rare).
        groups = {
            name: sum(t - ticks0.get(name, {}).get(pid, 0) for pid, t in pids.items()) / TICK
            for name, pids in now.items()
        }
        groups["loadgen"] = own - own0
        ours, others = sum(groups.values()), (busy - busy0) / TICK
        self.usage = CpuUsage(wall - wall0, ours, max(0.0, others - ours), groups)


def wait_quiet(groups, *, max_other_cores: float, timeout: float) -> float:
    """Wait (at most `timeout` s) until other processes use less than `max_other_cores`: the
    last sample's figure."""
    deadline = time.monotonic() + timeout
    while True:
        with CpuMonitor(groups) as monitor:
            time.sleep(0.5)
        if monitor.usage.other_cores < max_other_cores or time.monotonic() >= deadline:
            return monitor.usage.other_cores
        time.sleep(0.5)
