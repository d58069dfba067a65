"""What a reader gets from a kernel-benchmark payload: the printed table (GB/s per variant
and case, medians, ratios, targets) and the plot (GB/s against size, the model case as bars)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from benchmarks.harness.machine import machine_line, threads_line
from benchmarks.harness.text_table import text_table
from benchmarks.kernels.variants import shown_name

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
        rows.append([shown_name(name, info), str(info["bytes_per_element"])] + cells)
    lines = [machine_line(payload.get("machine", {})), threads_line(payload.get("machine", {})),
             f"the library's kernels ran on: {_library_path(payload)} (MTA_KERNELS=native|emulated|reference on "
             "the CPU)",
             "GB/s from useful bytes (percent of the case's best copy/triad, both in bus bytes)"]
    lines += text_table(["variant", "B/el"] + [c["case"] for c in cases], rows)
    lines.append("")
    lines.append("median seconds per call")
    for case in cases:
        parts = ", ".join(f"{shown_name(n, f)} {f['median_s']:.3g}" for n, f in case["variants"].items())
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


def _library_path(payload: dict[str, Any]) -> str:
    """The path the library's kernels took (results of before the path was recorded per variant
    hold it in the settings)."""
    for case in payload["cases"]:
        for name, figure in case["variants"].items():
            if shown_name(name, figure) != name:
                return figure["path"]
    return payload["settings"].get("kernel_path", "native")


def _label(name: str, figure: dict[str, Any]) -> str:
    shown = shown_name(name, figure)
    return figure["label"] if shown == name else f"{figure['label']} [{figure['path']}]"


#: bytes per element an accumulation keeps resident: acc and g, fp32 (where the sweep leaves each cache)
_RESIDENT_BYTES = 8


def _memory_limits(ax: Any, sweep: list[dict[str, Any]]) -> None:
    """The copy (and triad) limit of the largest case, drawn only over the sizes where it applies:
    the cases whose own copy runs within 15% of it (out of the caches, at memory speed)."""
    largest = sweep[-1]["limit"]
    copy = largest["copy_gb_per_s"]
    start = len(sweep) - 1
    while start > 0 and abs(sweep[start - 1]["limit"]["copy_gb_per_s"] - copy) <= 0.15 * copy:
        start -= 1
    span = (sweep[start]["elements"], sweep[-1]["elements"])
    where = f"{sweep[start]['case']} and above" if start < len(sweep) - 1 else sweep[-1]["case"]
    ax.hlines(copy, *span, color="black", linestyle=":", linewidth=1.5,
              label=f"copy limit out of the caches ({where}): {copy:.1f} GB/s (bus bytes)")
    if largest["triad_gb_per_s"]:
        ax.hlines(largest["triad_gb_per_s"], *span, color="gray", linestyle="-.", linewidth=1.5,
                  label=f"triad limit ({where}): {largest['triad_gb_per_s']:.1f} GB/s (bus bytes)")


def _cache_levels(ax: Any, caches: dict[str, int], elements: list[int]) -> None:
    """A vertical line where acc + g (8 B/elem) outgrow each cache level the machine reported."""
    for name, size in caches.items():
        at = size / _RESIDENT_BYTES
        if elements and elements[0] <= at <= elements[-1]:
            ax.axvline(at, color="tab:gray", linewidth=0.8, alpha=0.7)
            shown = f"{size >> 20} MiB" if size >= 1 << 20 else f"{size >> 10} KiB"
            ax.annotate(f"{name} {shown}", (at, 1.0), xycoords=("data", "axes fraction"),
                        xytext=(2, -10), textcoords="offset points", fontsize=7, color="tab:gray", rotation=90,
                        va="top")


def plot(payload: dict[str, Any], path: Path) -> None:
    """GB/s against elements per variant (log x), the copy/triad limits as horizontal lines, and
    the model-shaped case as bars."""
    from matplotlib.figure import Figure  # no pyplot: no global backend state, nothing shown

    sweep = [c for c in payload["cases"] if c["case"] != "model"]
    model = next((c for c in payload["cases"] if c["case"] == "model"), None)
    fig = Figure(figsize=(15, 7.5), layout="constrained")
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
                label=_label(name, info),
                linewidth=2.5 if name == "native_arena" else 1.2,
                alpha=0.6 if style == "--" else 1.0,
            )
        _memory_limits(ax, sweep)
        ax.set_xscale("log", base=2)
        _cache_levels(ax, payload["machine"].get("caches") or {}, x)
        ax.set_xlabel("elements per buffer (gray lines: where acc + g, 8 B/elem fp32, outgrow each cache the OS "
                      "reports)")
        ax.set_ylabel("GB/s (useful bytes)")
        ax.set_title(
            f"accumulation kernels on {_library_path(payload)}, {payload['settings']['device']}: "
            f"{payload['machine'].get('gpu') or payload['machine']['cpu']}"
        )
        ax.grid(True, which="both", alpha=0.3)
        # under the panels, so that it covers no curve
        fig.legend(*ax.get_legend_handles_labels(), fontsize=7, loc="outside lower center", ncol=4, frameon=False)
    if model is not None:
        items = list(model["variants"].items())
        bars.barh(
            [_label(n, f) for n, f in items],
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
