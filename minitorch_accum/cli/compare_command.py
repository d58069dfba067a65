"""``maccum compare``: k x b, k*b and b from the same seed, measured side by side.

Writes ``compare.png`` (loss curves against items seen, and a bar of peak activation
memory per run) and ``compare.md`` (the table printed at the end).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from minitorch_accum.cli.train_command import run_training

__all__ = ["compare_command", "compare_runs", "write_compare_plot"]


def compare_runs(args: Any, out: Path) -> list[dict[str, Any]]:
    b, k = args.micro_batch, args.accum
    runs = [(f"{k} x {b} (accumulated)", b, k), (f"{k * b} (one big batch)", k * b, 1),
            (f"{b} (no accumulation)", b, 1)]
    results = []
    for label, micro, accum in runs:
        slug = f"b{micro}_k{accum}"
        print(f"--- {label}: micro-batch {micro}, k={accum}")
        start = time.perf_counter()
        history = run_training(args, out / slug, micro, accum, args.progress, overwrite=True)  # compare re-runs
        seconds = time.perf_counter() - start
        items, curve = 0, []
        for record in history.steps:
            items += record["items"]
            curve.append((items, record["loss"]))
        last_valid = history.valid[-1] if history.valid else {}
        results.append({
            "label": label, "micro_batch": micro, "k": accum, "steps": len(history.steps),
            "final_loss": history.final_loss, "valid_loss": last_valid.get("loss"),
            "valid_accuracy": last_valid.get("accuracy"),
            "peak_activation_bytes": max(r["peak_activation_bytes"] for r in history.steps),
            "seconds": seconds, "curve": curve,
        })
    return results


def markdown_table(results: list[dict[str, Any]]) -> str:
    lines = ["| run | micro-batch | k | optimizer steps | final train loss | valid accuracy "
             "| peak activation memory | wall time |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in results:
        acc = "-" if r["valid_accuracy"] is None else f"{r['valid_accuracy']:.3f}"
        lines.append(f"| {r['label']} | {r['micro_batch']} | {r['k']} | {r['steps']} | {r['final_loss']:.4f} | "
                     f"{acc} | {r['peak_activation_bytes'] / 1024:.1f} KiB | {r['seconds']:.1f} s |")
    return "\n".join(lines)


def write_compare_plot(results: list[dict[str, Any]], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (curves, bars) = plt.subplots(1, 2, figsize=(11, 4.2), gridspec_kw={"width_ratios": [2, 1]})
    styles = ["-", "--", ":"]
    for r, style in zip(results, styles, strict=False):
        xs, ys = zip(*r["curve"], strict=True)
        curves.plot(xs, ys, style, label=r["label"], linewidth=1.8)
    curves.set_xlabel("items seen")
    curves.set_ylabel("train loss per item (per optimizer step)")
    curves.set_title(title)
    curves.legend()
    labels = [r["label"].split(" (")[0] for r in results]
    peaks = [r["peak_activation_bytes"] / 1024 for r in results]
    bars.bar(labels, peaks, color=["tab:blue", "tab:orange", "tab:green"][: len(results)])
    bars.set_ylabel("peak activation memory (KiB)")
    bars.set_title("measured by tracemalloc")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def compare_command(args: Any) -> int:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results = compare_runs(args, out)
    table = markdown_table(results)
    (out / "compare.md").write_text(table + "\n", encoding="utf-8")
    write_compare_plot(results, out / "compare.png",
                       f"{args.dataset}: {args.accum} x {args.micro_batch} vs {args.accum * args.micro_batch}")
    print()
    print(table)
    acc, big = results[0], results[1]
    ratio = acc["peak_activation_bytes"] / big["peak_activation_bytes"]
    print(f"\n{acc['label']} used {ratio:.3f} of the activation memory of {big['label']} "
          f"(1/{args.accum} = {1 / args.accum:.3f}); final losses {acc['final_loss']:.6f} vs {big['final_loss']:.6f}")
    print(f"wrote {out / 'compare.png'} and {out / 'compare.md'}")
    return 0
