"""Progress display: a rich live bar on a terminal, plain lines elsewhere, or nothing."""

from __future__ import annotations

import sys
from typing import Any, TextIO

from minitorch_accum.train.metrics import METRICS

__all__ = ["PROGRESS_MODES", "Progress", "activation_memory", "format_bytes", "make_progress", "write_line"]

PROGRESS_MODES = ("auto", "rich", "plain", "none")


def write_line(text: str, stream: TextIO | None = None) -> None:
    """``text`` and its newline in one write, then flushed. print() writes the two apart, and on an
    unbuffered stream (PYTHONUNBUFFERED) mpiexec -prepend-rank then labels the newline as a line of its own,
    gluing ``[0] `` to the end of the text."""
    stream = sys.stderr if stream is None else stream
    stream.write(text + "\n")
    stream.flush()


class Progress:
    """Base: silent."""

    def start(self, total_steps: int, description: str) -> None:
        """Begin a display for ``total_steps`` optimizer steps."""

    def micro_batch(self, step: int, micro: int, k: int) -> None:
        """A micro-batch of the current window is done."""

    def step(self, record: dict[str, Any]) -> None:
        """An optimizer step is done; ``record`` is its metrics line."""

    def message(self, text: str) -> None:
        """A one-off line (validation results, checkpoints, skipped windows)."""

    def stop(self) -> None:
        """End the display."""


def format_bytes(count: float) -> str:
    """Bytes in binary units with one decimal: 512 B, 58.3 KiB, 28.5 MiB."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(count) >= size:
            return f"{count / size:.1f} {unit}"
    return f"{count:.0f} B"


def activation_memory(record: dict[str, Any]) -> tuple[int | None, int]:
    """(arrays, other) of a metrics record: the largest peak of the window's micro-batches in
    array bytes (None where arrays were not told apart), and what the allocator counted on top
    of it (Python objects: the graph's nodes, closures, shape tuples; never below 0). The
    progress lines and ``maccum compare`` both show these two, so they always agree."""
    total = int(record["peak_activation_bytes"])
    arrays = record.get("peak_array_bytes")
    if arrays is None:
        return None, total
    return int(arrays), max(0, total - int(arrays))


def _memory_text(record: dict[str, Any]) -> str:
    arrays, other = activation_memory(record)
    if arrays is None:
        return f"peak {format_bytes(other)}"
    return f"act {format_bytes(arrays)} arrays +{format_bytes(other)} other"


def _summary(record: dict[str, Any], metrics: tuple[str, ...] = METRICS, k: int | None = None) -> str:
    """One line for a metrics record, showing the metrics chosen with LearnerBuilder.metric();
    ``k``: the window's micro-batches, to say when this window was a partial one."""
    parts = [f"epoch {record['epoch']}", f"step {record['step']}"]
    if "loss" in metrics:
        parts.append(f"loss {record['loss']:.4f}")
    if "accuracy" in metrics and record.get("accuracy") is not None:
        parts.append(f"acc {record['accuracy']:.3f}")
    if "lr" in metrics:
        parts.append(f"lr {record['lr']:.3g}")
    if "grad_norm" in metrics and record.get("grad_norm") is not None:
        parts.append(f"|g| {record['grad_norm']:.3g}")
    if "peak_memory" in metrics:
        parts.append(_memory_text(record))
        if k is not None and record.get("micro_batches", k) < k:
            parts.append(f"(partial window, {record['micro_batches']} of {k} micro-batches: act is its largest "
                         "micro-batch's)")
    if "items_per_second" in metrics:
        parts.append(f"{record['items_per_second']:.0f} items/s")
    if record.get("skipped"):
        parts.append("SKIPPED (non-finite gradient)")
    return "  ".join(parts)


class PlainProgress(Progress):
    """One line per optimizer step (every ``every`` steps), for logs and pipes."""

    def __init__(self, stream: TextIO | None = None, every: int | None = None,
                 metrics: tuple[str, ...] = METRICS) -> None:
        self.stream = stream or sys.stdout
        self.every = every
        self.metrics = metrics
        self.k: int | None = None  # the window's micro-batches, from the last micro_batch() call

    def start(self, total_steps: int, description: str) -> None:
        if self.every is None:  # about ten lines per run, whatever its length
            self.every = max(1, total_steps // 10)
        write_line(f"{description}: {total_steps} optimizer steps", self.stream)

    def micro_batch(self, step: int, micro: int, k: int) -> None:
        self.k = k

    def step(self, record: dict[str, Any]) -> None:
        if record["step"] % (self.every or 1) == 0 or record.get("skipped"):
            write_line(_summary(record, self.metrics, self.k), self.stream)

    def message(self, text: str) -> None:
        write_line(text, self.stream)


class RichProgress(Progress):
    """A live bar: optimizer step, micro-batch within the window, loss, items/s."""

    def __init__(self) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeRemainingColumn
        from rich.progress import Progress as RichBar

        self._bar = RichBar(
            TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
            TextColumn("micro {task.fields[micro]}"), TextColumn("loss {task.fields[loss]}"),
            TextColumn("{task.fields[rate]} items/s"), TextColumn("{task.fields[memory]}"), TimeRemainingColumn(),
        )
        self._task: Any = None

    def start(self, total_steps: int, description: str) -> None:
        self._bar.start()
        self._task = self._bar.add_task(description, total=total_steps, micro="-", loss="-", rate="-",
                                        memory="")

    def micro_batch(self, step: int, micro: int, k: int) -> None:
        self._bar.update(self._task, micro=f"{micro}/{k}")

    def step(self, record: dict[str, Any]) -> None:
        self._bar.update(self._task, advance=1, loss=f"{record['loss']:.4f}",
                         rate=f"{record['items_per_second']:.0f}", memory=_memory_text(record))

    def message(self, text: str) -> None:
        self._bar.console.print(text)

    def stop(self) -> None:
        if self._bar.live.is_started:  # once: a stop's line may follow it, then fit ends the display again
            self._bar.stop()


def make_progress(mode: str | Progress = "auto", stream: TextIO | None = None,
                  metrics: tuple[str, ...] = METRICS) -> Progress:
    """``"auto"``: rich on a terminal, plain otherwise; or exactly ``"rich"``/``"plain"``/``"none"``;
    a Progress given (the terminal monitor, ``train.tui``) is used as it is."""
    if isinstance(mode, Progress):
        return mode
    if mode not in PROGRESS_MODES:
        raise ValueError(f"progress must be one of {', '.join(PROGRESS_MODES)}, got {mode!r}")
    if mode == "auto":
        mode = "rich" if (stream or sys.stdout).isatty() else "plain"
    if mode == "rich":
        return RichProgress()
    if mode == "plain":
        return PlainProgress(stream, metrics=metrics)
    return Progress()
