"""The monitor's panels: curves per optimizer step, the window filling, the run's rates, its checkpoints."""

from __future__ import annotations

from typing import Any

from textual.widgets import Static
from textual_plotext import PlotextPlot

from minitorch_accum.train.progress import format_bytes

__all__ = ["CheckpointList", "RunStats", "SeriesPlot", "WindowGauge"]


class SeriesPlot(PlotextPlot):
    """Named series of (optimizer step, value) points; redrawn at most a few times a second
    (``redraw``), so a fast run is not slowed by drawing while every point is kept."""

    def __init__(self, title: str, **widget: Any) -> None:
        super().__init__(**widget)
        self.title = title
        self.series: dict[str, tuple[list[float], list[float]]] = {}
        self._dirty = False

    def add(self, name: str, x: float, y: float) -> None:
        xs, ys = self.series.setdefault(name, ([], []))
        xs.append(x)
        ys.append(y)
        self._dirty = True

    def points(self, name: str) -> int:
        return len(self.series.get(name, ((), ()))[0])

    def redraw(self) -> None:
        if not self._dirty:
            return
        self._dirty = False
        plt = self.plt
        plt.clear_data()
        plt.title(self.title)
        plt.xlabel("optimizer step")
        for name, (xs, ys) in self.series.items():
            if name.startswith("valid"):
                plt.scatter(xs, ys, label=name, marker="o")
            else:
                plt.plot(xs, ys, label=name, marker="braille")
        self.refresh()


def _bar(filled: int, total: int, width: int = 32) -> str:
    cells = min(total, width) if total else width
    done = round(cells * filled / total) if total else 0
    return "█" * done + "░" * (cells - done)


class WindowGauge(Static):
    """The window filling: micro-batch i of k, the items so far, and the activation memory of a
    micro-batch against one batch of the whole window (of which it is 1/k)."""

    def __init__(self, **widget: Any) -> None:
        super().__init__("waiting for the first micro-batch", **widget)
        self.step = 0
        self.micro = 0
        self.k = 0
        self.items = 0
        self.array_bytes: int | None = None

    def fill(self, step: int, micro: int, k: int, items: int, array_bytes: int | None) -> None:
        self.step, self.micro, self.k, self.items = step, micro, k, items
        if array_bytes is not None:
            self.array_bytes = array_bytes
        self._show()

    def closed(self, step: int, k: int) -> None:
        """The window was stepped: the next one starts empty."""
        self.step, self.micro, self.k, self.items = step, 0, k, 0
        self._show()

    def _show(self) -> None:
        lines = [f"window of optimizer step {self.step + 1}", f"micro-batch {self.micro} of {self.k}  "
                 f"{_bar(self.micro, self.k)}", f"{self.items:,} items so far"]
        if self.array_bytes is not None and self.k:
            lines.append(f"activation arrays of a micro-batch: {format_bytes(self.array_bytes)}")
            lines.append(f"the window as one batch: ~{format_bytes(self.array_bytes * self.k)} (k x, estimated)")
            lines.append(f"alive at once: 1/{self.k} of that")
        self.update("\n".join(lines))


class RunStats(Static):
    """Step, epoch, loss and accuracy of the last window, items/s, lr, gradient norm."""

    def __init__(self, **widget: Any) -> None:
        super().__init__("", **widget)
        self.total_steps = 0

    def show_step(self, record: dict[str, Any]) -> None:
        accuracy = "-" if record.get("accuracy") is None else f"{record['accuracy']:.3f}"
        norm = "-" if record.get("grad_norm") is None else f"{record['grad_norm']:.3g}"
        lines = [f"step {record['step']} of {self.total_steps}, epoch {record['epoch']}",
                 f"train loss {record['loss']:.4f}, accuracy {accuracy}",
                 f"{record['items_per_second']:,.0f} items/s, lr {record['lr']:.3g}, |g| {norm}",
                 f"{record['micro_batches']} micro-batches, {record['items']:,} items in the window"]
        if record.get("skipped"):
            lines.append("SKIPPED: non-finite gradient")
        self.update("\n".join(lines))


class CheckpointList(Static):
    """The newest checkpoints written, with their optimizer step."""

    def __init__(self, **widget: Any) -> None:
        super().__init__("checkpoints: none yet", **widget)
        self.saved: list[tuple[int, str]] = []

    def add(self, step: int, path: str) -> None:
        self.saved.append((step, path))
        self.update("checkpoints:\n" + "\n".join(f"step {s}: {p}" for s, p in self.saved[-4:]))
