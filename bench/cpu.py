"""Who used the CPUs during a measurement: the bench's own processes or someone else.

The bench shares a small machine with whatever else runs on it (test suites, builds). A
measurement is only worth comparing when nothing else took CPU time meanwhile, so every load
run records the CPU the machine spent outside the bench's processes (gunicorn and its workers,
the load generator, this process, and the PostgreSQL backends serving the bench database).
"""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")


def _busy_ticks() -> int:
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in fields[:8])
    return user + nice + system + irq + softirq + steal


def _proc_ticks(pid: int) -> int:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0
    fields = stat.rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime, stime


def children_of(pid: int) -> list[int]:
    """pid and its descendants (from /proc)."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        parents.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo.extend(parents.get(current, []))
    return found


def _own_seconds() -> float:
    """This process and its reaped children (wrk, the Python load generator's pool)."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


@dataclass
class CpuUsage:
    seconds: float  # wall time
    ours: float  # CPU seconds of the bench's processes
    others: float  # CPU seconds of everything else
    groups: dict[str, float]  # CPU seconds by group of the bench's processes, and "loadgen"

    @property
    def other_cores(self) -> float:
        return self.others / self.seconds if self.seconds else 0.0

    @property
    def our_cores(self) -> float:
        return self.ours / self.seconds if self.seconds else 0.0

    def cores(self, group: str) -> float:
        return self.groups.get(group, 0.0) / self.seconds if self.seconds else 0.0


class CpuMonitor:
    """`with CpuMonitor(groups) as m: ...` then `m.usage`.

    `groups` returns {group name: pids} (called at start and end); this process and the
    children it reaped meanwhile (wrk, the Python load generator) count as group "loadgen".
    """

    def __init__(self, groups: Callable[[], dict[str, Iterable[int]]]) -> None:
        self._groups = groups
        self.usage: CpuUsage | None = None

    def _snapshot(self) -> dict[str, dict[int, int]]:
        return {
            name: {pid: _proc_ticks(pid) for pid in pids} for name, pids in self._groups().items()
        }

    def __enter__(self) -> CpuMonitor:
        self._wall = time.monotonic()
        self._busy = _busy_ticks()
        self._own = _own_seconds()
        self._ticks = self._snapshot()
        return self

    def __exit__(self, *exc) -> None:
        ticks = self._snapshot()
        busy = (_busy_ticks() - self._busy) / TICK
        wall = time.monotonic() - self._wall
        # Processes born during the run count whole; those gone count for nothing (rare).
        groups = {
            name: sum(t - self._ticks.get(name, {}).get(pid, 0) for pid, t in pids.items()) / TICK
            for name, pids in ticks.items()
        }
        groups["loadgen"] = _own_seconds() - self._own
        ours = sum(groups.values())
        self.usage = CpuUsage(seconds=wall, ours=ours, others=max(0.0, busy - ours), groups=groups)


def wait_quiet(
    groups: Callable[[], dict[str, Iterable[int]]],
    *,
    max_other_cores: float,
    timeout: float,
    sample: float = 0.5,
) -> float:
    """Wait (at most `timeout` s) until other processes use less than `max_other_cores`.

    Returns the last sample's other-cores figure (so the caller can say the machine was busy).
    """
    deadline = time.monotonic() + timeout
    while True:
        with CpuMonitor(groups) as monitor:
            time.sleep(sample)
        other = monitor.usage.other_cores if monitor.usage else 0.0
        if other < max_other_cores or time.monotonic() >= deadline:
            return other
        time.sleep(0.5)
