"""The explain figure: one window's timeline beside one batch of the same items.

Each recording is a column of two panels on one time axis (milliseconds from its start):

- the spans, one row each: every micro-batch's forward and backward, the kernels writing the
  arena (copy and add, GEMM-fused writes, window passes), the close and the optimizer step with
  its fused kernel (the column's title names it and the scale it folded in);
- the array bytes alive over the same time, the allocator's own count, with the arena's size.

The memory panels of all columns share one scale, so k small peaks stand beside one big one.
Nothing is drawn over the data: the legend is the figure's, below the panels, and the label of
the micro-batch peak sits above every curve of its panel (tests read the drawn boxes).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from minitorch_accum.observe import AccumulationTrace
from minitorch_accum.observe.trace_events import COLLECTIVES, OPTIMIZER_STEPS
from minitorch_accum.train.progress import format_bytes

__all__ = ["ROWS", "alive_curve", "save_window_figure", "window_figure"]

#: the timeline's rows, top to bottom
ROWS = ("forward", "backward", "arena writes", "close", "optimizer step")
_COLORS = {"forward": "tab:blue", "backward": "tab:orange", "close": "tab:purple", "optimizer step": "tab:green"}
_KERNEL_COLORS = {"copy": "tab:cyan", "add": "tab:red", "gemm": "tab:olive", "pass": "0.45"}


def _kernel_kind(kernel: str, micro_batch: int) -> str:
    if micro_batch < 0:
        return "pass"
    if kernel.startswith("gemm"):
        return "gemm"
    return "copy" if "copy" in kernel or kernel == "container-store" else "add"


def alive_curve(trace: AccumulationTrace) -> tuple[list[float], list[int]]:
    """(seconds from the origin, bytes alive) after each allocation event, from 0 at the start."""
    memory = trace.memory
    if memory is None:
        return [], []
    if memory.keep == "frames":
        times, alive, level = [], [], 0
        for seconds, _, nbytes, _, _ in memory.events:
            level += nbytes
            times.append(seconds)
            alive.append(level)
        return times, alive
    return [s for s, _ in memory.samples], [b for _, b in memory.samples]


def _timeline(ax: Any, trace: AccumulationTrace, start: float, span_ms: float) -> dict[str, int]:
    """Draw the rows of ``trace`` on ``ax``; returns how many bars each row got."""
    def ms(seconds: float) -> float:
        return (seconds - start) * 1e3

    thinnest = span_ms / 300  # a kernel of a microsecond still shows
    drawn = {}
    y_of = {row: len(ROWS) - 1 - i for i, row in enumerate(ROWS)}
    for row in ("forward", "backward", "close", "optimizer step"):
        bars = [(ms(s.start), max(s.seconds * 1e3, thinnest)) for s in trace.spans if s.name == row]
        ax.broken_barh(bars, (y_of[row] - 0.35, 0.7), facecolors=_COLORS[row], label=row)
        drawn[row] = len(bars)
    launches = [(ms(e.start), max(e.seconds * 1e3, thinnest)) for e in trace.events if e.kernel in OPTIMIZER_STEPS]
    if launches:  # inside the step's span, half its height: the kernel that read the arena
        ax.broken_barh(launches, (y_of["optimizer step"] - 0.18, 0.36), facecolors="darkgreen",
                       label="fused step kernel (folds the scale in)")
    drawn["optimizer step: kernel"] = len(launches)
    for kind, color in _KERNEL_COLORS.items():
        bars = [(ms(e.start), max(e.seconds * 1e3, thinnest)) for e in trace.events
                if _kernel_kind(e.kernel, e.micro_batch) == kind and e.kernel not in (*COLLECTIVES, *OPTIMIZER_STEPS)]
        if bars:
            ax.broken_barh(bars, (y_of["arena writes"] - 0.35, 0.7), facecolors=color,
                           label={"copy": "first write (copy)", "add": "add into the arena", "gemm": "GEMM-fused write",
                                  "pass": "window pass"}[kind])
        drawn[f"arena writes: {kind}"] = len(bars)
    for s in trace.spans:
        if s.name.startswith("micro-batch "):
            ax.axvline(ms(s.start), color="0.85", linewidth=0.8, zorder=0)
    ax.set_yticks([y_of[r] for r in ROWS], ROWS, fontsize=8)
    ax.set_ylim(-0.7, len(ROWS) - 0.3)
    return drawn


def _step_title(trace: AccumulationTrace) -> str:
    """What the step ran and the scale it folded in, from its recorded launch."""
    launches = [e for e in trace.events if e.kernel in OPTIMIZER_STEPS]
    if not launches:
        return "no optimizer step recorded"
    scales = ", ".join(dict.fromkeys(f"{e.scale:.3g}" for e in launches if e.scale is not None))
    return f"step: {launches[0].kernel}, the scale {scales} folded in"


def window_figure(traces: Sequence[AccumulationTrace]) -> Any:
    """A matplotlib Figure of ``traces`` side by side (see the module docstring)."""
    from matplotlib.figure import Figure  # no pyplot: no backend switch in the caller's process

    fig = Figure(figsize=(6.2 * len(traces), 6.2))
    axes = fig.subplots(2, len(traces), squeeze=False, sharey="row", gridspec_kw={"height_ratios": [1.25, 1]})
    highest = [max([*alive_curve(t)[1], *_arena_sizes(t)], default=0) for t in traces]
    scale, unit = (1 << 20, "MiB") if max(highest, default=0) >= 1 << 20 else (1024, "KiB")
    for column, trace in enumerate(traces):
        top, bottom = axes[0][column], axes[1][column]
        ends = [s.start + s.seconds for s in trace.spans] + [e.start + e.seconds for e in trace.events]
        start = min([s.start for s in trace.spans] + [e.start for e in trace.events], default=0.0)
        drawn = _timeline(top, trace, start, (max(ends, default=start) - start) * 1e3)
        micro = drawn["forward"]
        top.set_title(f"{trace.name or 'window'}: {micro} micro-batch{'es' if micro != 1 else ''}\n"
                      f"{_step_title(trace)}", fontsize=9)
        times, alive = alive_curve(trace)
        if times:
            bottom.step([(t - start) * 1e3 for t in times], [a / scale for a in alive], where="post",
                        color="tab:blue", label="array bytes alive (the allocator's count)")
        arena = _arena_sizes(trace)
        if arena:
            bottom.axhline(arena[-1] / scale, color="tab:red", linestyle="--", linewidth=1,
                           label=f"gradient arena {format_bytes(arena[-1])} (persistent)")
        if times:
            _mark_activation_peak(bottom, trace, times, alive, start, scale, highest[column])
        bottom.set_xlabel("milliseconds from the window's start")
        bottom.set_ylabel(f"{unit} alive" if column == 0 else "")
        top.sharex(bottom)
    # room above the highest curve for the label of its peak; the legend below every panel
    axes[1][0].set_ylim(bottom=min(0.0, axes[1][0].get_ylim()[0]), top=max(highest, default=0) / scale * 1.4 or 1.0)
    handles, labels = axes[0][0].get_legend_handles_labels()
    for handle, label in zip(*axes[1][0].get_legend_handles_labels(), strict=True):
        handles.append(handle)
        labels.append(label)
    fig.legend(handles, labels, loc="lower center", ncol=min(6, len(labels)), fontsize=8, frameon=False)
    fig.suptitle("one window, kernel by kernel, and its memory: k micro-batches beside one batch of the same items",
                 fontsize=11)
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    return fig


def _arena_sizes(trace: AccumulationTrace) -> list[int]:
    return [n for track, _, n in trace.counters if track == "arena bytes"]


def _mark_activation_peak(ax: Any, trace: AccumulationTrace, times: list[float], alive: list[int], start: float,
                          scale: float, highest: float) -> None:
    """Label the peak while micro-batches ran (activations and temporaries), apart from what the
    step allocates (the optimizer's state, at its first step): above ``highest``, the top of
    every curve of the panel, on the side of the peak that has room."""
    spans = [s for s in trace.spans if s.name in ("forward", "backward")]
    if not spans:
        return
    first, last = min(s.start for s in spans), max(s.start + s.seconds for s in spans)
    inside = [(a, t) for t, a in zip(times, alive, strict=True) if first <= t <= last]
    if not inside:
        return
    peak, at = max(inside)
    x = (at - start) * 1e3
    right_half = at - start > (max(times) - start) / 2
    ax.annotate(f"micro-batch peak {format_bytes(peak)}", (x, highest / scale), textcoords="offset points",
                xytext=(0, 5), ha="right" if right_half else "left", va="bottom", fontsize=8)
    step = [s for s in trace.spans if s.name == "optimizer step"]
    if step:
        ax.axvspan((step[0].start - start) * 1e3, (step[0].start + step[0].seconds - start) * 1e3,
                   color="tab:green", alpha=0.15, label="optimizer step (allocates its state once)")


def save_window_figure(traces: Sequence[AccumulationTrace], path: str | os.PathLike) -> Path:
    """Draw ``window_figure(traces)`` into ``path`` (a PNG)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    window_figure(traces).savefig(target, dpi=110)
    return target
