"""compare.png tells its story: a headline computed from the runs, the loss gap of k x b - k*b, why b differs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from minitorch_accum.cli.compare_plot import loss_gaps, loss_headline, write_compare_plot
from tests.drawn_overlap import covered


def _run(name: str, kind: str, curve: list[tuple[int, float]], arrays: int, k: int) -> dict[str, Any]:
    return {"name": name, "label": f"{name} ({kind})", "kind": kind, "k_used": k, "steps": len(curve),
            "curve": curve, "array_bytes": arrays, "other_bytes": 40_000}


def _runs(gap: float = 2.5e-5, acc_arrays: int = 1_000, small_curve: list[tuple[int, float]] | None = None
          ) -> list[dict[str, Any]]:
    big_curve = [(256, 4.0), (512, 3.5), (768, 3.2)]
    acc_curve = [(x, y + (gap if i == 2 else 0.0)) for i, (x, y) in enumerate(big_curve)]
    small = small_curve or [(32 * i, 4.0 - 0.05 * i) for i in range(1, 25)]
    return [_run("8 x 32", "accumulated", acc_curve, acc_arrays, 8), _run("256", "one big batch", big_curve, 8_000, 1),
            _run("32", "no accumulation", small, 1_000, 1)]


def test_the_headline_says_same_training_and_the_measured_share_of_memory() -> None:
    assert loss_headline(_runs(), 0.10) == ("8 x 32 and 256: the same training (losses within 2.5e-05), "
                                            "1/8 of the activation memory")


def test_the_headline_gives_the_ratio_when_it_is_not_1_over_k() -> None:
    assert loss_headline(_runs(acc_arrays=2_000), 0.10).endswith("0.25 of the activation memory (1/8 = 0.125)")


def test_runs_over_other_items_are_not_called_the_same_training() -> None:
    runs = _runs()
    runs[0]["curve"] = [(300, 4.0), (600, 3.4)]
    assert loss_gaps(runs) is None
    assert "different windows, not step for step the same training" in loss_headline(runs, 0.10)


def test_the_gap_is_k_x_b_minus_k_times_b_step_by_step() -> None:
    assert loss_gaps(_runs(gap=3e-5)) == [(256, 0.0), (512, 0.0), (768, pytest.approx(3e-5))]


def _drawn(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, runs: list[dict[str, Any]]) -> Any:
    from matplotlib.figure import Figure

    drawn: list[Figure] = []
    save = Figure.savefig

    def keep(self: Figure, *args: Any, **kwargs: Any) -> None:
        drawn.append(self)
        save(self, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", keep)
    write_compare_plot(runs, tmp_path / "compare.png", "digits", 0.10)
    assert (tmp_path / "compare.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    return drawn[0]


def test_the_figure_holds_the_gap_and_the_reason_b_differs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    figure = _drawn(tmp_path, monkeypatch, _runs())
    loss = figure.axes[0]
    assert loss.get_title().startswith("8 x 32 and 256: the same training")
    gap = [a for a in figure.axes if a.get_title().startswith("loss of 8 x 32 minus 256")]
    assert len(gap) == 1 and list(gap[0].lines[0].get_ydata()) == pytest.approx([0.0, 0.0, 2.5e-5])
    assert gap[0].get_shared_x_axes().joined(gap[0], loss)  # the same items, one above the other
    labels = [t.get_text() for t in gap[0].get_legend().get_texts()]  # the curves' legend, under the gap
    assert "8.0x as many optimizer steps over the same items" in labels[2] and "a different training" in labels[2]


def _plateau(start: float, end: float, steps: int, every: int) -> list[tuple[int, float]]:
    """A loss curve that stays high for a while (the digits curves of the issue, over 3,200-4,000 items)."""
    return [(every * (i + 1), start + (end - start) * (i / (steps - 1)) ** 3) for i in range(steps)]


@pytest.mark.parametrize("curves", ["falling", "plateau", "one step"])
def test_nothing_is_drawn_over_a_curve_a_bar_or_another_label(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                curves: str) -> None:
    runs = _runs()
    if curves == "plateau":  # high and flat to the right, where an inset in the corner would sit
        big = _plateau(2.3, 2.0, 12, 360)
        small = _plateau(2.3, 0.4, 90, 45)
        runs[1]["curve"] = big
        runs[0]["curve"] = [(x, y + 1e-7 * i) for i, (x, y) in enumerate(big)]
        runs[2]["curve"] = small
    elif curves == "one step":  # --accum beyond the data: one window per epoch
        runs[1]["curve"] = [(1438, 2.3), (2876, 2.26)]
        runs[0]["curve"] = [(1438, 2.3), (2876, 2.26 + 1e-7)]
        runs[2]["curve"] = _plateau(2.3, 0.4, 90, 32)
    for run in runs:
        run["steps"] = len(run["curve"])
    figure = _drawn(tmp_path, monkeypatch, runs)
    assert covered(figure) == []
