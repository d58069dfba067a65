"""The plain progress lines: a partial window says so where its activation figure is printed."""

from __future__ import annotations

import io
from typing import Any

from minitorch_accum.train.progress import PlainProgress, make_progress


def _record(step: int, micro_batches: int) -> dict[str, Any]:
    return {"epoch": 0, "step": step, "loss": 2.0, "accuracy": 0.5, "lr": 1e-3, "grad_norm": 0.4,
            "peak_activation_bytes": 130_000, "peak_array_bytes": 90_000, "items_per_second": 3000.0,
            "micro_batches": micro_batches, "skipped": False}


def test_a_partial_window_is_marked_on_its_line_and_a_full_one_is_not() -> None:
    out = io.StringIO()
    progress = PlainProgress(out, every=1)
    progress.start(2, "training")
    for micro in range(1, 5):
        progress.micro_batch(0, micro, 4)
    progress.step(_record(1, 4))
    progress.micro_batch(1, 1, 4)
    progress.step(_record(2, 3))
    full, partial = out.getvalue().splitlines()[1:]
    assert "act 87.9 KiB arrays" in full and "partial window" not in full
    assert "(partial window, 3 of 4 micro-batches: act is its largest micro-batch's)" in partial


def test_a_progress_given_is_the_one_used() -> None:
    mine = PlainProgress(io.StringIO())
    assert make_progress(mine) is mine
