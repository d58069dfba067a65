"""The monitor's panels: a metric's plot (its full history or its recent steps) or its summary, the
run's status, the window filling, the run's progress with its ETA, the checkpoints written.

Each panel writes lines that fit its width (no wrapping: a panel keeps its height, and so its
border, whatever its text); a path too long for its panel loses its beginning, not its name."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from textual.widget import Widget
from textual.widgets import Static
from textual_plotext import PlotextPlot

from minitorch_accum.train.progress import format_bytes
from minitorch_accum.train.tui.monitor_series import RECENT_STEPS, MetricHistory, format_duration

__all__ = ["CheckpointList", "MetricPlot", "MetricSummary", "RunProgress", "StatusPanel", "WindowPanel",
           "bar", "ellipsize_left"]

#: the plot kinds, in the order up and down step through them (Burn's full, recent and summary)
PLOT_KINDS = ("full", "recent", "summary")


def bar(done: float, total: float, width: int) -> str:
    """A bar of ``width`` cells, ``done / total`` of them filled."""
    width = max(width, 1)
    filled = round(width * min(max(done / total, 0.0), 1.0)) if total else 0
    return "█" * filled + "░" * (width - filled)


def ellipsize_left(text: str, width: int) -> str:
    """``text`` cut to ``width`` cells by dropping its beginning (a path keeps its file name)."""
    if len(text) <= width:
        return text
    return "…" + text[len(text) - width + 1:] if width > 1 else text[-width:]


def _number(value: float | None, digits: int = 4) -> str:
    return "-" if value is None else f"{value:.{digits}g}"


class MetricPlot(PlotextPlot):
    """One metric's series per optimizer step, train as a line and valid as points; ``kind`` full
    (every step) or recent (the last RECENT_STEPS). Drawn at most a few times a second (``redraw``)."""

    def __init__(self, history: MetricHistory, **widget: Any) -> None:
        super().__init__(**widget)
        self.history = history
        self.metric = history.metrics[0].name
        self.kind = "full"
        #: what the last redraw plotted, by split
        self.drawn: dict[str, tuple[list[float], list[float]]] = {}
        self._dirty = True

    def show(self, metric: str, kind: str) -> None:
        self.metric, self.kind = metric, kind
        self.changed()
        self.redraw()

    def changed(self) -> None:
        self._dirty = True

    def redraw(self) -> None:
        if not self._dirty:
            return
        self._dirty = False
        metric = self.history.metric(self.metric)
        self.drawn = {split: points for split, points in
                      self.history.series(metric.name, recent=self.kind == "recent").items() if points[0]}
        plt = self.plt
        plt.clear_data()
        plt.clear_figure()
        scope = f"last {RECENT_STEPS} steps" if self.kind == "recent" else "every step"
        plt.title(f"{metric.title} ({scope})" if self.drawn else f"{metric.title}: no value yet")
        plt.xlabel("optimizer step")
        for split, (xs, ys) in self.drawn.items():
            if split == "valid":
                plt.scatter(xs, ys, label=split, marker="o")
            else:
                plt.plot(xs, ys, label=split, marker="braille")
        self.refresh()


class MetricSummary(Static):
    """A metric summed up, a column per split: points, last, least, most, mean, the step of the best."""

    def show(self, history: MetricHistory, metric: str) -> None:
        rows = history.summary(metric)
        if not rows:
            self.update(f"{metric}: no value yet")
            return
        table = [("", [row.split for row in rows]), ("steps", [str(row.points) for row in rows]),
                 ("last", [_number(row.last) for row in rows]), ("min", [_number(row.low) for row in rows]),
                 ("max", [_number(row.high) for row in rows]), ("mean", [_number(row.mean) for row in rows])]
        if history.metric(metric).best:
            table.append((f"best ({history.metric(metric).best})",
                          ["-" if row.best_step is None else f"step {row.best_step}" for row in rows]))
        self.update("\n".join([f"{metric}: summary of the run"]
                              + [f"{name:<11}" + "".join(f"{cell:>11}" for cell in cells) for name, cells in table]))


class StatusPanel(Static):
    """Burn's status, and what it lacks: the micro-step within the window, the effective batch (the
    window's items), the rate in the run's unit (tokens/s for a language model), the gradient norm."""

    def __init__(self, unit: str = "items", **widget: Any) -> None:
        super().__init__(**widget)
        self.unit = unit
        self.mode = "starting"
        self.epoch: tuple[int, int] | None = None
        self.step: tuple[int, int] = (0, 0)
        self.micro: tuple[int, int] | None = None
        self.record: dict[str, Any] | None = None

    def on_mount(self) -> None:
        self.show()

    def show(self) -> None:
        record = self.record or {}
        effective = (f"{record['items']:,} {self.unit} / {record['micro_batches']} micro-batches" if record
                     else "-")
        rate = f"{record['items_per_second']:,.0f}" if record else "-"
        rows = [("mode", self.mode),
                ("epoch", "-" if self.epoch is None else f"{self.epoch[0] + 1} of {self.epoch[1]}"),
                ("step", f"{self.step[0]} of {self.step[1]}"),
                ("micro-step", "-" if self.micro is None else f"{self.micro[0]} of {self.micro[1]}"),
                ("eff. batch", effective),
                (f"{self.unit}/s", rate),
                ("lr", _number(record.get("lr"))),
                ("grad norm", "skipped (non-finite)" if record.get("skipped") else _number(record.get("grad_norm")))]
        self.update("\n".join(f"{name:<11}{value}" for name, value in rows))


class WindowPanel(Static):
    """The window filling: whose optimizer step it is, its items so far, and the activation memory
    of a micro-batch against one batch of the whole window (k times as much, estimated)."""

    def __init__(self, unit: str = "items", **widget: Any) -> None:
        super().__init__("waiting for the first micro-batch", **widget)
        self.unit = unit
        self.step = 0  # optimizer steps taken
        self.micro = 0
        self.k = 0
        self.items = 0
        self.array_bytes: int | None = None
        self.filling = False  # a micro-batch came since the last optimizer step
        self.ended: str | None = None  # how the run ended, once it has

    def fill(self, step: int, micro: int, k: int, items: int, array_bytes: int | None) -> None:
        self.step, self.micro, self.k, self.items = step, micro, k, items
        self.filling = True
        if array_bytes is not None:
            self.array_bytes = array_bytes
        self._show()

    def closed(self, step: int) -> None:
        """Optimizer step ``step`` was taken: its window is done."""
        self.step, self.filling = step, False
        self._show()

    def end(self, how: str) -> None:
        """The run is over (``how``: finished, stopped ...): no window is filling any more."""
        self.ended = how
        self._show()

    def _show(self) -> None:
        done = f"{self.items:,} {self.unit}, {self.micro} micro-batches"
        if self.ended is not None:
            lines = [f"{self.ended} after optimizer step {self.step}", f"last window: {done}"]
        elif self.filling:
            lines = [f"window of optimizer step {self.step + 1}",
                     f"{self.items:,} {self.unit} in {self.micro} of {self.k} micro-batches"]
        else:
            lines = [f"optimizer step {self.step} taken", f"its window: {done}"]
        if self.array_bytes is not None and self.k:
            lines.append(f"act. arrays/micro-batch {format_bytes(self.array_bytes)}")
            lines.append(f"window as one batch ~{format_bytes(self.array_bytes * self.k)}")
            lines.append(f"alive at once: 1/{self.k} of that")
        self.update("\n".join(lines))


class RunProgress(Widget):
    """Burn's progress: the run's optimizer steps with the time left, the window's micro-batches,
    and the pace the run is held to (``--pace``), with the seconds it has waited for it."""

    DEFAULT_CSS = "RunProgress { height: 3; }"

    def __init__(self, **widget: Any) -> None:
        super().__init__(**widget)
        self.step = (0, 0)
        self.micro = (0, 0)
        self.eta: float | None = None
        self.finished = False
        self.pace = 0.0
        self.waited = 0.0

    def set(self, **values: Any) -> None:
        for name, value in values.items():
            setattr(self, name, value)
        self.refresh()

    def lines(self, width: int) -> list[str]:
        done, total = self.step
        eta = "done" if self.finished else "ETA -" if self.eta is None else f"ETA {format_duration(self.eta)}"
        run_text = f" {done} of {total} steps {round(100 * done / total) if total else 0}% {eta}"
        micro, k = self.micro
        window_text = f" {micro} of {k} micro-batches"
        gauge = max(width - 7 - max(len(run_text), len(window_text)), 4)
        pace = ("full speed (--pace 0)" if not self.pace else
                f"at least {self.pace:.2g} s a step (waited {format_duration(self.waited)}; --pace 0: full speed)")
        return [f"run    {bar(done, total, gauge)}{run_text}", f"window {bar(micro, k, gauge)}{window_text}",
                f"pace   {pace}"]

    def render(self) -> str:
        width = self.content_size.width
        return "\n".join(line[:width] for line in self.lines(width))


class CheckpointList(Widget):
    """The newest checkpoints on disk, one a line: the optimizer step, then the path, whose
    beginning gives way when the panel is narrow (never wrapped in the middle of a name). Those
    the run has removed since (it keeps the newest few) are counted in the title, not listed."""

    def __init__(self, **widget: Any) -> None:
        super().__init__(**widget)
        self.written = 0
        self.saved: list[tuple[int, str]] = []  # those still on disk when the last one was written

    def add(self, step: int, path: str) -> None:
        # the run removes its oldest checkpoints as it writes a new one: look once, here, not at every draw
        self.written += 1
        self.saved = [(s, p) for s, p in self.saved if Path(p).is_dir()] + [(step, path)]
        self.border_title = f"checkpoints: {self.written} written, {len(self.saved)} on disk"
        self.refresh()

    def lines(self, width: int, height: int) -> list[str]:
        if not self.saved:
            return ["none yet"]
        shown = self.saved[-max(height, 1):]
        return [f"step {step}: " + ellipsize_left(path, width - len(f"step {step}: ")) for step, path in shown]

    def render(self) -> str:
        size = self.content_size
        return "\n".join(self.lines(size.width, size.height))
