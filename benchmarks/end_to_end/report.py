"""What a reader gets from an end-to-end payload: the printed table (every model and k, then
the targets) and the plot (items/s and the memory ratio against k, one column per model)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.end_to_end.memory import MEMORY_SLACK
from benchmarks.harness.contention import QUIET_SHARE
from benchmarks.harness.machine import machine_line, threads_line
from benchmarks.harness.text_table import text_table
from benchmarks.harness.timing import median

__all__ = ["format_table", "plot"]


def format_table(payload: dict[str, Any]) -> str:
    """The ratios of every model and k, then the targets, as plain text."""
    env = payload["environment"]
    others = env.get("other_processes_cpu_share")
    lines: list[str] = [
        machine_line(payload["machine"]),
        f"the library's kernels on "
        f"{env.get('kernel_path', 'native')}, BLAS threads "
        f"{env['blas_threads']}, torch threads {env['torch_threads']}, other processes used "
        f"{'?' if others is None else f'{others:.0%}'} of the cores meanwhile",
        threads_line(payload["machine"]),
        "",
    ]
    header = ("k", "variant", "ms/micro", "overhead", "direct", "items/s", "x torch", "mem ratio")
    for name, model in payload["models"].items():
        lines.append(f"{name} ({model['shape']}, {model['parameters'] / 1e6:.2f}M parameters, "
                     f"b={payload['settings']['micro_batch']}, {model['items_per_micro_batch']} items per micro-batch)")
        timing = model["timing"]
        known = [v for v in timing["round_other_processes_cpu_share"] if v is not None]
        busy = (f"median {median(known):.0%}, max {max(known):.0%}, {sum(v <= QUIET_SHARE for v in known)} rounds "
                f"<= {QUIET_SHARE:.0%}") if known else "unknown"
        lines.append(f"timing: medians over {len(timing['rounds_used'])} {timing['basis']} of {model['repeats']} "
                     f"(other processes' share of the cores per round: {busy})")
        rows: list[tuple[str, ...]] = []
        for k, row in model["by_k"].items():
            rows.append((k, "plain backward", f"{row['plain']['micro_step_seconds'] * 1e3:.2f}", "", "", "", "", ""))
            for fusion, f in row["fusions"].items():
                mem = model["memory"].get(fusion, {}).get(k)
                memory = "" if mem is None or mem["ratio"] is None else f"{mem['ratio']:.3f} (1/k={1 / int(k):.3f})"
                rows.append((k, f"acc {fusion}", f"{f['micro_step_seconds'] * 1e3:.2f}",
                             f"{f['overhead_share'] * 100:+.1f}%", f"{f['direct_share'] * 100:.1f}%",
                             f"{f['items_per_second']:.0f}",
                             "" if f["vs_torch"] is None else f"{f['vs_torch']:.2f}", memory))
            if row["torch"] is not None:
                t = row["torch"]
                rows.append((k, "torch eager", f"{t['micro_step_seconds'] * 1e3:.2f}", "", "",
                             f"{t['items_per_second']:.0f}", "1.00", ""))
        lines += text_table(header, rows, numbers_right=True, rule=True)
        lines.append("")
    lines.append("targets")
    target_rows = []
    for t in payload["targets"]:
        measured = "n/a" if t["measured"] is None else (f"{t['measured'] * 100:+.2f}%" if "overhead" in t["name"]
                                                        else f"{t['measured']:.3f}")
        threshold = f"{t['threshold'] * 100:.1f}%" if "overhead" in t["name"] else f"{t['threshold']:.4f}"
        met = {True: "met", False: "MISSED", None: "n/a"}[t["met"]]
        target_rows.append((t["name"], t["model"], str(t["k"]), measured, f"{t['comparison']} {threshold}", met))
    lines += text_table(("target", "model", "k", "measured", "threshold", ""), target_rows, numbers_right=True,
                        rule=True)
    lines.append("")
    lines.append("overhead = (t_accumulate - t_plain_backward) / t_accumulate per micro-batch (medians of interleaved "
                 "rounds); direct = accumulation kernels from the trace / t_accumulate")
    return "\n".join(lines)


def plot(payload: dict[str, Any], path: Path) -> None:
    """items/s against k (one line per fusion, torch dashed) and the memory ratio against k
    (with the ideal 1/k), one column per model."""
    # a Figure without pyplot: no backend switch, no global state in the caller's process
    from matplotlib.figure import Figure
    from matplotlib.ticker import NullLocator

    models = payload["models"]
    fig = Figure(figsize=(5.5 * len(models), 8))
    axes = fig.subplots(2, len(models), squeeze=False)
    for column, (name, model) in enumerate(models.items()):
        ks = [int(k) for k in model["by_k"]]
        speed = axes[0][column]
        fusions = list(next(iter(model["by_k"].values()))["fusions"])
        for fusion in fusions:
            speed.plot(ks, [model["by_k"][str(k)]["fusions"][fusion]["items_per_second"] for k in ks], marker="o",
                       label=f"ours, fusion={fusion}")
        if all(model["by_k"][str(k)]["torch"] is not None for k in ks):
            speed.plot(ks, [model["by_k"][str(k)]["torch"]["items_per_second"] for k in ks], "k--", marker="s",
                       label="PyTorch eager")
        # log axes: items/s of the digits MLP and of the wide one differ by orders of magnitude
        speed.set(title=f"{name}: throughput", xlabel="k (micro-batches per step)", ylabel="items / s",
                  xscale="log", yscale="log")
        mem = axes[1][column]
        for fusion, by_k in model["memory"].items():
            mem.plot(ks, [by_k[str(k)]["ratio"] for k in ks], marker="o", label=f"fusion={fusion}")
        mem.plot(ks, [1 / k for k in ks], "k:", label="1/k (ideal)")
        mem.plot(ks, [(1 + MEMORY_SLACK) / k for k in ks], color="0.6", linestyle="--", label="1/k + 10% (target)")
        mem.set(title=f"{name}: peak memory, k x b / one batch of k*b", xlabel="k (micro-batches per step)",
                ylabel="ratio", xscale="log", yscale="log")
        for axis in (speed, mem):
            axis.set_xticks(ks, [str(k) for k in ks])
            axis.xaxis.set_minor_locator(NullLocator())
            axis.legend(fontsize=8)
    fig.suptitle(f"end-to-end accumulation, b={payload['settings']['micro_batch']}, kernels on "
                 f"{payload['environment'].get('kernel_path', 'native')}, {payload['machine'].get('cpu', '')}",
                 fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
