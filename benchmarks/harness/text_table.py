"""Plain-text tables for the benchmarks' printed summaries."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["text_table"]


def text_table(header: Sequence[str], rows: Sequence[Sequence[str]], numbers_right: bool = False,
               rule: bool = False) -> list[str]:
    """The lines of a table whose columns are as wide as their widest cell. ``numbers_right``
    right-aligns every column but the first; ``rule`` draws dashes under the header."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.rjust(w) if numbers_right and i else c.ljust(w)
                         for i, (c, w) in enumerate(zip(cells, widths, strict=True)))

    lines = [line(header)]
    if rule:
        lines.append("  ".join("-" * w for w in widths))
    return lines + [line(r) for r in rows]
