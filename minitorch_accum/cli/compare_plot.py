"""``compare.png``: the loss curves with the story they tell, and the activation memory of each run.

The loss panel's headline is computed from the runs: whether ``k x b`` and ``k*b`` took the
same steps over the same items with losses that agree to rounding, and the measured share of
the big batch's activation memory. A panel under it, on the same axis of items, draws the
difference of their losses, invisible in the loss panel where the two curves lie on top of each
other; the legend says why ``b`` without accumulation differs (k times the optimizer steps over
the same items). Nothing covers a curve or a bar: each panel's legend is below it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from minitorch_accum.train.progress import format_bytes

__all__ = ["loss_gaps", "loss_headline", "write_compare_plot"]


def loss_gaps(results: list[dict[str, Any]]) -> list[tuple[float, float]] | None:
    """(items seen, loss of k x b - loss of k*b) after each step, or None when the two runs did
    not step over the same items (the curves are then not step for step comparable)."""
    acc, big = results[0]["curve"], results[1]["curve"]
    if not acc or [a[0] for a in acc] != [b[0] for b in big]:
        return None
    return [(a[0], a[1] - b[1]) for a, b in zip(acc, big, strict=True)]


def _fraction(ratio: float, k: int, tolerance: float) -> str:
    if abs(ratio * k - 1) <= tolerance:
        return f"1/{k} of the activation memory"
    return f"{ratio:.2f} of the activation memory (1/{k} = {1 / k:.3f})"


def loss_headline(results: list[dict[str, Any]], tolerance: float) -> str:
    """What the loss panel shows, in one line, from the measurements."""
    acc, big = results[0], results[1]
    gaps = loss_gaps(results)
    ratio = None if acc["array_bytes"] is None or not big["array_bytes"] else acc["array_bytes"] / big["array_bytes"]
    memory = "" if ratio is None else ", " + _fraction(ratio, acc["k_used"], tolerance)
    if gaps is None:
        return f"{acc['name']} and {big['name']}: different windows, not step for step the same training{memory}"
    largest = max(abs(g) for _, g in gaps)
    return f"{acc['name']} and {big['name']}: the same training (losses within {largest:.1e}){memory}"


def _loss_panel(axes: Any, gap_axes: Any, results: list[dict[str, Any]], title: str, tolerance: float) -> None:
    styles = [("-", None, 2.2), ("--", "o", 1.4), (":", None, 1.4)]
    acc = results[0]
    for i, (r, (line, marker, width)) in enumerate(zip(results, styles, strict=False)):
        xs, ys = zip(*r["curve"], strict=True)
        label = f"{r['label']}: {r['steps']} steps"
        if i == 2 and acc["steps"]:
            label += (f", {r['steps'] / acc['steps']:.1f}x as many optimizer steps over the same items (one per "
                      "micro-batch): a different training, further along")
        axes.plot(xs, ys, linestyle=line, marker=marker, markersize=3, linewidth=width, label=label)
    axes.set_ylabel("train loss per item\n(each optimizer step)")
    axes.set_title(f"{loss_headline(results, tolerance)}\n{title}", fontsize=9)
    axes.tick_params(labelbottom=False)
    gap_axes.set_xlabel("items seen")
    gap_axes.legend(*axes.get_legend_handles_labels(), fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.38),
                    ncol=1, frameon=False)
    gaps = loss_gaps(results)
    if gaps is None:
        gap_axes.set_title(f"{acc['name']} and {results[1]['name']} step over different items: no step-by-step gap",
                           fontsize=7)
        gap_axes.set_yticks([])
        return
    xs, ys = zip(*gaps, strict=True)
    gap_axes.plot(xs, ys, color="tab:purple", linewidth=1.2, marker=".", markersize=3)
    gap_axes.axhline(0.0, color="0.5", linewidth=0.8)
    largest = max(abs(g) for g in ys)
    gap_axes.set_title(f"loss of {acc['name']} minus {results[1]['name']} (largest {largest:.1e})", fontsize=7)
    gap_axes.ticklabel_format(axis="y", style="sci", scilimits=(0, 0))
    gap_axes.tick_params(labelsize=6)
    gap_axes.yaxis.get_offset_text().set_fontsize(6)


def _memory_panel(bars: Any, results: list[dict[str, Any]]) -> None:
    mib = 1 << 20
    scale, unit = (mib, "MiB") if max(r["array_bytes"] or r["other_bytes"] for r in results) >= mib else (1024, "KiB")
    names = [f"{r['name']}\nk={r['k_used']}, {r['steps']} steps" for r in results]
    arrays = [(r["array_bytes"] or 0) / scale for r in results]
    other = [r["other_bytes"] / scale for r in results]
    colors = ["tab:blue", "tab:orange", "tab:green"][: len(results)]
    bars.bar(names, arrays, color=colors, label="activation arrays")
    bars.bar(names, other, bottom=arrays, color="0.75", hatch="//", edgecolor="0.4",
             label="other: Python objects (graph)")
    top = max(a + o for a, o in zip(arrays, other, strict=True))
    big = results[1]["array_bytes"]
    for i, r in enumerate(results):
        text = format_bytes(r["array_bytes"]) if r["array_bytes"] is not None else "-"
        if r["array_bytes"] is not None and big:
            text += f"\n{r['array_bytes'] / big:.3f} of {results[1]['name']}"
        text += f"\n+{format_bytes(r['other_bytes'])} other"
        bars.text(i, arrays[i] + other[i] + top * 0.02, text, ha="center", va="bottom", fontsize=8)
    if big:
        k = results[0]["k_used"]
        bars.axhline(big / k / scale, color="k", linestyle="--", linewidth=1,
                     label=f"1/{k} of {results[1]['name']}")
    bars.set_ylim(0, top * 1.3)
    bars.set_ylabel(f"peak activation memory per micro-batch ({unit})")
    bars.set_title("measured by the allocator, per micro-batch\n(the runs' fullest windows)", fontsize=9)
    bars.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=2, frameon=False)


def write_compare_plot(results: list[dict[str, Any]], path: Path, title: str, tolerance: float = 0.10) -> None:
    """Loss curves against items seen with their headline, the k x b - k*b gap under them, and a
    stacked bar per run (arrays, other) with its values, the ratio to the big batch and the 1/k line."""
    from matplotlib.figure import Figure  # no pyplot: no backend switch in the caller's process

    fig = Figure(figsize=(12.5, 6.4), layout="constrained")  # constrained: room for the legends below
    panels = fig.subplot_mosaic([["loss", "memory"], ["gap", "memory"]], width_ratios=[1.6, 1],
                                height_ratios=[3, 1.2])
    panels["gap"].sharex(panels["loss"])
    _loss_panel(panels["loss"], panels["gap"], results, title, tolerance)
    _memory_panel(panels["memory"], results)
    fig.savefig(path, dpi=110)
