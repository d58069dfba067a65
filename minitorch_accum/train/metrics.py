"""Step-level metrics: one JSON line per optimizer step in ``DIR/metrics.jsonl``.

Every line of kind ``"train"`` holds: epoch, step, micro_batches, items, loss (per
item over the window), accuracy, lr, grad_norm, peak_activation_bytes,
accumulation_seconds (forward + backward + accumulation of the window's
micro-batches), step_seconds (clipping + optimizer step), items_per_second and
skipped (a non-finite window). Validation lines (kind ``"valid"``) come once per
epoch.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

__all__ = ["METRICS", "MetricsLog"]

#: metric names accepted by LearnerBuilder.metric(...), shown by the progress display
METRICS = ("loss", "accuracy", "items_per_second", "grad_norm", "lr", "peak_memory")


class MetricsLog:
    """Appends JSON lines and keeps them in memory (the history)."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self.records: list[dict[str, Any]] = []

    def write(self, record: dict[str, Any]) -> None:
        self.records.append(record)
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(record) + "\n")

    def truncate_after(self, step: int) -> None:
        """Forget lines of steps after ``step`` (a resumed run re-does them)."""
        kept: list[dict[str, Any]] = []
        if self.path.exists():
            for line in self.path.read_text(encoding="utf-8").splitlines():
                if not line.strip():
                    continue
                record = json.loads(line)
                if record.get("step", 0) <= step:
                    kept.append(record)
        tmp = self.path.with_suffix(".jsonl.tmp")
        tmp.write_text("".join(json.dumps(r) + "\n" for r in kept), encoding="utf-8")
        os.replace(tmp, self.path)
        self.records = kept

    def reset(self) -> None:
        self.path.write_text("", encoding="utf-8")
        self.records = []
