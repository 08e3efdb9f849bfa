"""Plain-text output of the bench: aligned tables and target lines."""

from __future__ import annotations

from bench.context import SectionResult


def table(columns: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(str(x)) for x in col) for col in zip(columns, *rows, strict=False)]

    def line(cells: list[str]) -> str:
        out = []
        for i, (cell, width) in enumerate(zip(cells, widths, strict=False)):
            cell = str(cell)
            out.append(cell.ljust(width) if i == 0 else cell.rjust(width))
        return "  ".join(out).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(columns), rule, *(line(r) for r in rows)])


def section(result: SectionResult) -> str:
    parts = [f"== {result.name}: {result.title} =="]
    if result.rows:
        parts.append(table(result.columns, result.rows))
    if result.targets:
        parts.append("")
        parts.append("Targets:")
        for target in result.targets:
            mark = "MET   " if target.met else "MISSED"
            parts.append(f"  [{mark}] {target.description}: {target.detail}")
    for note in result.notes:
        parts.append(note)
    for failure in result.failures:
        parts.append(f"  FAILED: {failure}")
    return "\n".join(parts)


def facts(title: str, items: dict[str, str]) -> str:
    width = max(len(k) for k in items)
    return "\n".join([title, *(f"  {k.ljust(width)}  {v}" for k, v in items.items())])
