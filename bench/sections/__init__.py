"""The bench's sections, by the name `bench/run.py --only <name>` takes, in running order.

To add one: write `bench/sections/<name>.py` with `run(ctx: Context) -> SectionResult` (see
bench/context.py for what the context offers) and register it below.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from bench import direct_restaking
from bench.context import Context, SectionResult
from bench.sections import api, faults, indexing


@dataclass(frozen=True)
class Section:
    name: str
    title: str
    run: Callable[[Context], SectionResult]


SECTIONS: dict[str, Section] = {
    section.name: section
    for section in (
        Section("api", api.TITLE, api.run),
        Section("restaking", direct_restaking.TITLE, direct_restaking.section),
        Section("indexing", indexing.TITLE, indexing.run),
        Section("faults", faults.TITLE, faults.run),
    )
}
