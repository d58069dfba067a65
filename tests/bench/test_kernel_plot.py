"""The kernel benchmark's figure: its legend covers no data, cache levels are marked, and the
copy limit is drawn only over the sizes where it applies."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from benchmarks.kernels.report import plot


def _case(power: int, copy: float, arena: float) -> dict[str, Any]:
    return {"case": f"2^{power}", "elements": 2**power,
            "limit": {"copy_gb_per_s": copy, "triad_gb_per_s": copy * 0.9},
            "variants": {"native_arena": {"label": "add_scale over the flat arena buffer", "role": "accumulate",
                                          "gb_per_s": arena}}}


def test_the_limits_span_only_the_sizes_out_of_the_caches_and_caches_are_marked(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from matplotlib.figure import Figure

    drawn: list[Figure] = []
    save = Figure.savefig
    monkeypatch.setattr(Figure, "savefig", lambda self, *a, **k: (drawn.append(self), save(self, *a, **k)))
    # in cache the copy runs at 130 GB/s; from 2^22 on at memory speed, about 40
    cases = [_case(p, c, a) for p, c, a in [(16, 130, 120), (18, 128, 125), (20, 120, 110), (22, 38, 37),
                                            (24, 41, 39), (26, 41.6, 40)]]
    payload = {"cases": cases, "settings": {"device": "cpu"},
               "machine": {"cpu": "test CPU", "caches": {"L1d": 48 << 10, "L2": 2 << 20, "L3": 32 << 20}}}
    plot(payload, tmp_path / "kernels.png")
    figure = drawn[0]
    ax = figure.axes[0]
    assert ax.get_legend() is None and len(figure.legends) == 1  # the legend sits under the panels
    copy = next(c for c in ax.collections if "copy limit" in str(c.get_label()))
    (start, y0), (stop, y1) = copy.get_segments()[0]
    assert (start, stop) == (2**22, 2**26) and y0 == y1 == 41.6
    assert "2^22 and above" in copy.get_label()
    marked = sorted(line.get_xdata()[0] for line in ax.lines if line.get_linestyle() == "-" and
                    len(set(line.get_xdata())) == 1)
    assert marked == [(2 << 20) / 8, (32 << 20) / 8]  # L1d's 6,144 elements are left of 2^16
    assert {t.get_text() for t in ax.texts} == {"L2 2 MiB", "L3 32 MiB"}
