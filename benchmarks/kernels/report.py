"""What a reader gets from a kernel-benchmark payload: the printed table (GB/s per variant
and case, medians, ratios, targets) and the plot (GB/s against size, the model case as bars)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from benchmarks.harness.machine import threads_line
from benchmarks.harness.text_table import text_table

__all__ = ["format_table", "plot"]


def _format_ratio(value: float | None, percent: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value:.0%}" if percent else f"{value:.2f}x"


def format_table(payload: dict[str, Any]) -> str:
    """The readable summary: GB/s per variant and case, the ratios, and the targets."""
    cases = payload["cases"]
    names: list[str] = []
    for case in cases:
        names += [n for n in case["variants"] if n not in names]
    rows = []
    for name in names:
        info = next(c["variants"][name] for c in cases if name in c["variants"])
        cells = []
        for case in cases:
            f = case["variants"].get(name)
            cells.append("-" if f is None else f"{f['gb_per_s']:.1f} ({f['fraction_of_limit']:.0%})")
        rows.append([name, str(info["bytes_per_element"])] + cells)
    lines = [threads_line(payload.get("machine", {})),
             "GB/s from useful bytes (percent of the case's best copy/triad, both in bus bytes)"]
    lines += text_table(["variant", "B/el"] + [c["case"] for c in cases], rows)
    lines.append("")
    lines.append("median seconds per call")
    for case in cases:
        parts = ", ".join(f"{n} {f['median_s']:.3g}" for n, f in case["variants"].items())
        lines.append(f"  {case['case']}: {parts}")
    lines.append("")
    lines.append("ratios (x = times faster, measured side by side)")
    ratio_names: list[str] = []
    for case in cases:
        ratio_names += [n for n in case["ratios"] if n not in ratio_names]
    ratio_rows = [[r] + [_format_ratio(c["ratios"].get(r), percent="fraction" in r) for c in cases]
                  for r in ratio_names]
    lines += text_table(["ratio"] + [c["case"] for c in cases], ratio_rows)
    lines.append("")
    torch = payload["settings"].get("torch")
    if torch:
        lines.append(f"PyTorch {torch['version']} mixed bf16 -> fp32 path that ran: {torch['mixed_dtype_call']}")
        lines.append(f"PyTorch OpenMP idle spin (GOMP_SPINCOUNT) during the run: {torch['gomp_spincount']}")
    lines.append("targets")
    for t in payload["targets"]:
        pct = "fraction" in t["target"] or "%" in t["target"]
        verdict = "n/a" if t["met"] is None else ("met" if t["met"] else "MISSED")
        lines.append(f"  [{verdict:>6}] {t['case']:>6}: {t['target']}: measured {_format_ratio(t['measured'], pct)}")
    if not payload["targets"]:
        lines.append("  (no case large enough for the targets in this run)")
    return "\n".join(lines)


def plot(payload: dict[str, Any], path: Path) -> None:
    """GB/s against elements per variant (log x), the copy/triad limits as horizontal lines, and
    the model-shaped case as bars."""
    from matplotlib.figure import Figure  # no pyplot: no global backend state, nothing shown

    sweep = [c for c in payload["cases"] if c["case"] != "model"]
    model = next((c for c in payload["cases"] if c["case"] == "model"), None)
    fig = Figure(figsize=(15, 6.5), layout="constrained")
    ax, bars = fig.subplots(1, 2, width_ratios=[1.6, 1])
    if sweep:
        names = list(sweep[-1]["variants"])
        x = [c["elements"] for c in sweep]
        for name in names:
            info = sweep[-1]["variants"][name]
            y = [c["variants"][name]["gb_per_s"] if name in c["variants"] else math.nan for c in sweep]
            style = "--" if info["role"] != "accumulate" else "-"
            ax.plot(
                x,
                y,
                style,
                marker="o",
                markersize=3,
                label=info["label"],
                linewidth=2.5 if name == "native_arena" else 1.2,
                alpha=0.6 if style == "--" else 1.0,
            )
        largest = sweep[-1]["limit"]
        ax.axhline(
            largest["copy_gb_per_s"],
            color="black",
            linestyle=":",
            label=f"copy limit at {sweep[-1]['case']}: {largest['copy_gb_per_s']:.1f} GB/s (bus bytes)",
        )
        if largest["triad_gb_per_s"]:
            ax.axhline(
                largest["triad_gb_per_s"],
                color="gray",
                linestyle="-.",
                label=f"triad limit at {sweep[-1]['case']}: {largest['triad_gb_per_s']:.1f} GB/s (bus bytes)",
            )
        ax.set_xscale("log", base=2)
        ax.set_xlabel("elements per buffer")
        ax.set_ylabel("GB/s (useful bytes)")
        ax.set_title(
            f"accumulation kernels, {payload['settings']['device']}: "
            f"{payload['machine'].get('gpu') or payload['machine']['cpu']}"
        )
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7, loc="best")
    if model is not None:
        items = list(model["variants"].items())
        bars.barh(
            [f["label"] for _, f in items],
            [f["gb_per_s"] for _, f in items],
            color=[
                "tab:orange" if n == "native_arena" else "tab:gray" if f["role"] != "accumulate" else "tab:blue"
                for n, f in items
            ],
        )
        bars.axvline(model["limit"]["gb_per_s"], color="black", linestyle=":", label="limit (best copy/triad)")
        bars.set_xlabel("GB/s (useful bytes)")
        bars.set_title(
            f"model-shaped: {model['tensors']} tensors, {model['elements'] / 1e6:.1f}M elements"
            + ("" if model["model_divisor"] == 1 else f" (dims / {model['model_divisor']})")
        )
        bars.tick_params(axis="y", labelsize=7)
        bars.invert_yaxis()
        bars.legend(fontsize=7)
    fig.savefig(path, dpi=110)
