"""Ours against PyTorch eager, each side in its own process: items/s of whole windows for every
k, with 1 and 2 threads, the ratio and its spread, and each micro-batch's time by its position.

Each round starts one process per side (``side.py``), in an order that alternates between
rounds; a process times ``windows`` windows of every k after a warm-up window. The ratio of a
round is ours / PyTorch items/s from that round's two medians; the table gives the median of
the rounds' ratios and their range, so a round that another process disturbed shows as spread
rather than hiding in one figure. The load average and the other processes' share of the CPUs
are recorded with every run: on a shared machine the ratio moves, the thread count says why.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from benchmarks.harness.contention import cpu_ticks, other_cpu_share
from benchmarks.harness.machine import loadavg, machine_info
from benchmarks.harness.program import Benchmark, Log
from benchmarks.harness.text_table import text_table

__all__ = ["VERSUS", "VersusSettings", "format_versus", "measure_versus", "summarize_rounds"]

ROOT = Path(__file__).resolve().parents[2]
TARGETS = {"char_transformer": 1.0, "wide_mlp": 1.3}  # issue 19: items/s ours / PyTorch eager, at least


@dataclass(frozen=True)
class VersusSettings:
    mode: str
    models: tuple[tuple[str, tuple[int, ...]], ...]  # (model, its ks)
    threads: tuple[int, ...] = (1, 2)
    rounds: int = 3
    windows: int = 4
    warmup: int = 1
    micro_batch: int = 32
    device: str = "cpu"


def full_settings(device: str = "cpu") -> VersusSettings:
    return VersusSettings("full", (("char_transformer", (1, 4, 8, 16)), ("wide_mlp", (1, 8))), device=device)


def quick_settings(device: str = "cpu") -> VersusSettings:
    return VersusSettings("quick", (("char_transformer", (1, 8)),), threads=(1,), rounds=1, windows=2, device=device)


def _run_side(side: str, model: str, ks: tuple[int, ...], threads: int, settings: VersusSettings) -> dict[str, Any]:
    env = {**os.environ, "MTA_THREADS": str(threads), "OMP_NUM_THREADS": str(threads),
           "OPENBLAS_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads),
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    command = [sys.executable, "-m", "benchmarks.end_to_end.side", side, model, "--ks", ",".join(map(str, ks)),
               "--micro-batch", str(settings.micro_batch), "--windows", str(settings.windows),
               "--warmup", str(settings.warmup)]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command[2:])} failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout)


def _spread(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def summarize_rounds(runs: list[tuple[dict[str, Any], dict[str, Any]]], ks: tuple[int, ...]) -> dict[str, Any]:
    """Per k: each side's items/s (median of every window), the rounds' ratios, positions."""
    by_k: dict[str, Any] = {}
    for k in ks:
        key = str(k)
        items = runs[0][0]["items_per_micro_batch"] * k
        ratios, cpu_ratios, ours_all, theirs_all = [], [], [], []
        for ours, theirs in runs:
            mine, other = ours["by_k"][key]["windows"], theirs["by_k"][key]["windows"]
            ratios.append(statistics.median(other) / statistics.median(mine))
            cpu_ratios.append(statistics.median(theirs["by_k"][key]["cpu_windows"])
                              / statistics.median(ours["by_k"][key]["cpu_windows"]))
            ours_all += mine
            theirs_all += other
        positions = {side: [statistics.median([t for run in runs for t in run[index]["by_k"][key]["positions"][i]])
                            for i in range(k)] for index, side in ((0, "ours"), (1, "torch"))}
        by_k[key] = {
            "ours_items_per_second": items / statistics.median(ours_all),
            "torch_items_per_second": items / statistics.median(theirs_all),
            "ratio": _spread(ratios), "round_ratios": ratios,
            # the same ratio by CPU seconds: what each side costs when it has a core to itself
            "cpu_ratio": _spread(cpu_ratios), "round_cpu_ratios": cpu_ratios,
            "ms_per_micro_batch_by_position": {side: [t * 1e3 for t in times] for side, times in positions.items()},
        }
    return by_k


def _children_cpu_seconds() -> float:
    times = os.times()
    return times.children_user + times.children_system


def _others_share(cpu_before: Any, children_before: float, started: float) -> float | None:
    """The share of the CPUs that processes other than this run (it and its sides) kept busy."""
    share = other_cpu_share(cpu_before, started)
    if share is None:
        return None
    sides = (_children_cpu_seconds() - children_before) / ((time.perf_counter() - started) * (os.cpu_count() or 1))
    return max(0.0, share - sides)


def measure_versus(settings: VersusSettings, log: Log) -> dict[str, Any]:
    started = time.perf_counter()
    cpu_before, load_before, children_before = cpu_ticks(), loadavg(), _children_cpu_seconds()
    models: dict[str, Any] = {}
    for model, ks in settings.models:
        models[model] = {}
        for threads in settings.threads:
            runs = []
            for round_index in range(settings.rounds):
                order = ("ours", "torch") if round_index % 2 == 0 else ("torch", "ours")
                got: dict[str, Any] = {}
                for side in order:
                    log(f"{model}, {threads} thread(s), round {round_index + 1}/{settings.rounds}: {side}")
                    got[side] = _run_side(side, model, ks, threads, settings)
                runs.append((got["ours"], got["torch"]))
            models[model][str(threads)] = {
                "by_k": summarize_rounds(runs, ks),
                "thread_settings": {"ours": runs[0][0]["threads"], "torch": runs[0][1]["threads"],
                                    "torch_threads": runs[0][1]["torch_threads"]},
                "memory": runs[0][0]["memory"],
                "loadavg_per_process": [[r[0]["loadavg_start"], r[1]["loadavg_start"]] for r in runs],
                "raw": [{"ours": r[0]["by_k"], "torch": r[1]["by_k"]} for r in runs],
            }
    payload: dict[str, Any] = {
        "benchmark": VERSUS.name, "machine": machine_info(), "settings": asdict(settings),
        "environment": {"loadavg_start": load_before, "loadavg_end": loadavg(),
                        "other_processes_cpu_share": _others_share(cpu_before, children_before, started),
                        "wall_seconds": time.perf_counter() - started},
        "models": models,
    }
    payload["targets"] = [
        {"model": model, "threads": int(threads), "k": int(k), "threshold": TARGETS[model],
         "measured": row["ratio"]["median"], "min": row["ratio"]["min"], "max": row["ratio"]["max"],
         "met": row["ratio"]["median"] >= TARGETS[model]}
        for model, per_threads in models.items() if model in TARGETS
        for threads, data in per_threads.items() for k, row in data["by_k"].items()]
    return payload


def format_versus(payload: dict[str, Any]) -> str:
    env = payload["environment"]
    share = env.get("other_processes_cpu_share")
    lines = [f"{payload['machine'].get('cpu')}, {payload['machine'].get('cores')} cores; load average "
             f"{env['loadavg_start']} at the start, {env['loadavg_end']} at the end; other processes used "
             f"{'?' if share is None else f'{share:.0%}'} of the CPUs meanwhile; each side in its own process",
             "threads: given to each side's process (below)", ""]
    rows = []
    for model, per_threads in payload["models"].items():
        for threads, data in per_threads.items():
            for k, row in data["by_k"].items():
                ratio = row["ratio"]
                first, last = (row["ms_per_micro_batch_by_position"][s] for s in ("ours", "torch"))
                cpu = row["cpu_ratio"]
                rows.append((model, threads, k, f"{row['ours_items_per_second']:,.0f}",
                             f"{row['torch_items_per_second']:,.0f}", f"{ratio['median']:.2f}",
                             f"{ratio['min']:.2f}-{ratio['max']:.2f}", f"{cpu['median']:.2f} ({cpu['min']:.2f}-"
                             f"{cpu['max']:.2f})",
                             f"{first[0]:.1f}/{first[-1]:.1f}", f"{last[0]:.1f}/{last[-1]:.1f}"))
    lines += text_table(("model", "threads", "k", "ours items/s", "torch items/s", "ours/torch", "rounds' range",
                         "by CPU time", "ours ms first/last", "torch ms first/last"), rows, numbers_right=True,
                        rule=True)
    lines.append("ours/torch: items/s by wall time, the median of the rounds' ratios; by CPU time: the same ratio of "
                 "the processes' CPU seconds per window (all their threads), which another process's load moves less")
    first = next(iter(payload["models"].values()))
    for threads, data in first.items():
        lines.append(f"threads {threads}: ours: {data['thread_settings']['ours']}; {data['memory']}")
        lines.append(f"threads {threads}: torch: {data['thread_settings']['torch_threads']} intra-op threads")
    return "\n".join(lines)


VERSUS: Benchmark[VersusSettings] = Benchmark(
    name="end_to_end_versus",
    description="Ours against PyTorch eager, each side in its own process: items/s per k, 1 and 2 threads.",
    quick_help="the char transformer only, k in {1, 8}, 1 thread, one round",
    full_settings=full_settings, quick_settings=quick_settings,
    measure=measure_versus, format_table=format_versus,
)
