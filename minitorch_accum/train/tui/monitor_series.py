"""What the terminal monitor keeps of a run, apart from how it is drawn: each metric's points per
optimizer step (train, and valid where the metric has one), its recent part and its summary, and
the time left. Plain Python: the widgets (``monitor_widgets.py``) only show it."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

__all__ = ["RECENT_STEPS", "Metric", "MetricHistory", "SummaryRow", "eta_seconds", "format_duration"]

#: the optimizer steps a "recent" plot shows (the full one shows them all)
RECENT_STEPS = 25


@dataclass(frozen=True)
class Metric:
    """One tab of the monitor: its name, the field of a metrics line it plots, and what its best is."""

    name: str
    key: str  # the field of a metrics line (``train/metrics.py``)
    title: str
    #: the better direction: "min" (loss), "max" (accuracy) or "" (neither: lr, a rate)
    best: str = ""


def _metrics(unit: str) -> tuple[Metric, ...]:
    return (Metric("loss", "loss", "loss per item", "min"), Metric("accuracy", "accuracy", "accuracy", "max"),
            Metric("lr", "lr", "learning rate"), Metric("grad norm", "grad_norm", "gradient norm of the window"),
            Metric(f"{unit}/s", "items_per_second", f"{unit} per second (forward, backward, step)"))


@dataclass(frozen=True)
class SummaryRow:
    """A series summed up: its points, last value, least, most, mean, and the step of its best."""

    split: str
    points: int
    last: float
    low: float
    high: float
    mean: float
    best_step: int | None


@dataclass
class MetricHistory:
    """Every point of every metric, by split (``train``, ``valid``), in the order they came.

    ``unit`` names the items of the run (tokens for a language model, images for digits): the rate's
    tab is ``tokens/s`` there, as the Learner's items are then tokens."""

    unit: str = "items"
    metrics: tuple[Metric, ...] = ()
    points: dict[str, dict[str, tuple[list[float], list[float]]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.metrics = _metrics(self.unit)
        self.points = {metric.name: {} for metric in self.metrics}

    def metric(self, name: str) -> Metric:
        return next(m for m in self.metrics if m.name == name)

    def _add(self, name: str, split: str, step: float, value: Any) -> None:
        if value is None or not math.isfinite(float(value)):
            return  # a skipped window has no gradient norm; NaN would spoil every axis
        xs, ys = self.points[name].setdefault(split, ([], []))
        xs.append(step)
        ys.append(float(value))

    def add_step(self, record: dict[str, Any]) -> None:
        """An optimizer step's metrics line."""
        for metric in self.metrics:
            self._add(metric.name, "train", record["step"], record.get(metric.key))

    def add_valid(self, record: dict[str, Any]) -> None:
        """A validation's line (loss and accuracy), at the optimizer step it followed."""
        for name in ("loss", "accuracy"):
            self._add(name, "valid", record["step"], record.get(self.metric(name).key))

    def series(self, name: str, recent: bool = False) -> dict[str, tuple[list[float], list[float]]]:
        """The metric's points by split; ``recent``: those of the last RECENT_STEPS optimizer steps."""
        every = self.points[name]
        if not recent:
            return every
        last = max((xs[-1] for xs, _ in every.values() if xs), default=0)
        cut = last - RECENT_STEPS
        return {split: ([x for x in xs if x > cut], [y for x, y in zip(xs, ys, strict=True) if x > cut])
                for split, (xs, ys) in every.items()}

    def summary(self, name: str) -> list[SummaryRow]:
        """One row per split that has points."""
        metric = self.metric(name)
        rows = []
        for split, (xs, ys) in self.points[name].items():
            if not ys:
                continue
            best = None
            if metric.best:
                pick = min if metric.best == "min" else max
                best = int(xs[ys.index(pick(ys))])
            rows.append(SummaryRow(split, len(ys), ys[-1], min(ys), max(ys), sum(ys) / len(ys), best))
        return rows


def eta_seconds(elapsed: float, steps_done: int, steps_left: int) -> float | None:
    """Seconds left at the pace so far (wall-clock, validations and any ``--pace`` included);
    None before the first step of this start."""
    if steps_done <= 0:
        return None
    return elapsed / steps_done * max(steps_left, 0)


def format_duration(seconds: float) -> str:
    """``7 s``, ``4 min 10 s``, ``2 h 5 min``, ``3 d 4 h``: the two largest units."""
    total = round(seconds)
    if total < 60:
        return f"{total} s"
    minutes, secs = divmod(total, 60)
    if minutes < 60:
        return f"{minutes} min {secs} s"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours} h {minutes} min"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h"
