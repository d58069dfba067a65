"""Ours against PyTorch eager and PyTorch compiled, each side in its own process: items/s of
whole windows for every k, with 1 and 2 threads, as the environment sets the BLAS and with its
variables unset, the ratios and their spread, the roofline of a micro-batch, and where ours
spends it.

Each round starts one process per side (``side.py``), in an order that rotates between rounds;
a process times ``windows`` windows of every k after a warm-up window. The ratio of a round is
ours / theirs items/s from that round's two medians; the table gives the median of the rounds'
ratios and their range, so a round that another process disturbed shows as spread rather than
hiding in one figure. The load average and the other processes' share of the CPUs are recorded
with every run: on a shared machine the ratio moves, the thread count says why.

The environments: OpenBLAS chooses its GEMM kernel from ``OPENBLAS_CORETYPE`` when it is set
(an AMD EPYC machine of this project sets Haswell), else from the CPU, and
``OPENBLAS_L2_SIZE`` changes its blocking. The run measures every side "as set" (the
environment as it is) and, when either variable is set, again with both "unset", and says which
is faster: the same command read 0.50x PyTorch on one machine and 0.89x on another (issue 27).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from benchmarks.end_to_end.roofline import micro_batch_flops
from benchmarks.harness.contention import cpu_ticks, other_cpu_share
from benchmarks.harness.machine import BLAS_ENVIRONMENT, loadavg, machine_info, machine_line
from benchmarks.harness.program import Benchmark, Log
from benchmarks.harness.text_table import text_table

__all__ = ["VERSUS", "VersusSettings", "format_versus", "measure_versus", "summarize_rounds"]

ROOT = Path(__file__).resolve().parents[2]
# items/s ours / PyTorch eager, at least (issue 27 for the transformers, issue 19 for the wide MLP)
TARGETS = {"char_transformer": 1.0, "nanogpt_cpu": 1.0, "wide_mlp": 1.3}
SCALING_TARGET = 0.65  # ours' ms per micro-batch with 2 threads over 1 thread, at most (issue 27, b = 32)
ENVIRONMENTS = ("as set", "unset")


@dataclass(frozen=True)
class VersusSettings:
    mode: str
    models: tuple[tuple[str, tuple[int, ...], int], ...]  # (model, its ks, its micro-batch)
    threads: tuple[int, ...] = (1, 2)
    rounds: int = 3
    windows: int = 4
    warmup: int = 1
    sides: tuple[str, ...] = ("ours", "torch", "compiled")
    environments: tuple[str, ...] = ENVIRONMENTS
    breakdown_windows: int = 2  # ours, first round: windows of the largest k timed by category
    device: str = "cpu"


def full_settings(device: str = "cpu") -> VersusSettings:
    return VersusSettings("full", (("char_transformer", (1, 4, 8, 16), 32), ("nanogpt_cpu", (1, 4, 8, 16), 12)),
                          device=device)


def quick_settings(device: str = "cpu") -> VersusSettings:
    return VersusSettings("quick", (("char_transformer", (1, 8), 32),), threads=(1,), rounds=1, windows=2,
                          sides=("ours", "torch"), environments=("as set",), breakdown_windows=1, device=device)


def environment_variants(names: tuple[str, ...], environ: dict[str, str] | None = None) -> dict[str, Any]:
    """{name: the BLAS variables to remove, or None where the variant is the same as "as set"}:
    "unset" removes ``OPENBLAS_CORETYPE`` and ``OPENBLAS_L2_SIZE``, and is left out (None) when
    neither is set."""
    environ = dict(os.environ) if environ is None else environ
    set_now = [name for name in BLAS_ENVIRONMENT if environ.get(name) is not None]
    variants: dict[str, Any] = {}
    for name in names:
        if name == "as set":
            variants[name] = []
        elif name == "unset":
            variants[name] = set_now or None
        else:
            raise ValueError(f"unknown environment {name!r}; known: {', '.join(ENVIRONMENTS)}")
    return variants


def _side_environment(threads: int, removed: list[str]) -> dict[str, str]:
    env = {**os.environ, "MTA_THREADS": str(threads), "OMP_NUM_THREADS": str(threads),
           "OPENBLAS_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads),
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    for name in removed:
        env.pop(name, None)
    return env


def _run_side(side: str, model: str, ks: tuple[int, ...], b: int, threads: int, removed: list[str],
              settings: VersusSettings, breakdown: int) -> dict[str, Any]:
    command = [sys.executable, "-m", "benchmarks.end_to_end.side", side, model, "--ks", ",".join(map(str, ks)),
               "--micro-batch", str(b), "--windows", str(settings.windows), "--warmup", str(settings.warmup),
               "--breakdown", str(breakdown)]
    done = subprocess.run(command, cwd=ROOT, env=_side_environment(threads, removed), capture_output=True, text=True,
                          check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command[2:])} failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _spread(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def summarize_rounds(runs: list[dict[str, dict[str, Any]]], ks: tuple[int, ...]) -> dict[str, Any]:
    """Per k: each side's items/s and ms per micro-batch (medians of every window), ours' ratio to
    each other side per round (from that round's medians), and each micro-batch by position."""
    sides = list(runs[0])
    by_k: dict[str, Any] = {}
    for k in ks:
        key = str(k)
        items = runs[0]["ours"]["items_per_micro_batch"] * k
        row: dict[str, Any] = {}
        for side in sides:
            windows = [t for run in runs for t in run[side]["by_k"][key]["windows"]]
            row[f"{side}_items_per_second"] = items / statistics.median(windows)
            row[f"{side}_ms_per_micro_batch"] = statistics.median(windows) / k * 1e3
            row.setdefault("ms_per_micro_batch_by_position", {})[side] = [
                statistics.median([t for run in runs for t in run[side]["by_k"][key]["positions"][i]]) * 1e3
                for i in range(k)]
        for other in sides[1:]:
            ratios = [statistics.median(run[other]["by_k"][key]["windows"])
                      / statistics.median(run["ours"]["by_k"][key]["windows"]) for run in runs]
            # the same ratio by CPU seconds: what each side costs when it has a core to itself
            cpu = [statistics.median(run[other]["by_k"][key]["cpu_windows"])
                   / statistics.median(run["ours"]["by_k"][key]["cpu_windows"]) for run in runs]
            name = "" if other == "torch" else f"_{other}"
            row[f"ratio{name}"], row[f"round_ratios{name}"] = _spread(ratios), ratios
            row[f"cpu_ratio{name}"], row[f"round_cpu_ratios{name}"] = _spread(cpu), cpu
        by_k[key] = row
    return by_k


def _roofline(model: str, b: int, ks: tuple[int, ...], runs: list[dict[str, dict[str, Any]]],
              by_k: dict[str, Any]) -> dict[str, Any]:
    """FLOPs per micro-batch, each library's GEMM rate on the model's shapes (median over the
    rounds), and the share of the faster rate each side reaches at the largest k."""
    from benchmarks.end_to_end.side import CASES

    flops = micro_batch_flops(CASES[model], b)
    rates = {}
    for side in ("ours", "torch"):
        known = [run[side]["gemm_rate"]["flops_per_second"] for run in runs if "gemm_rate" in run.get(side, {})]
        if known:
            rates[side] = statistics.median(known)
        numpy_rates = [run[side]["gemm_rate"]["numpy"]["flops_per_second"] for run in runs
                       if "numpy" in run.get(side, {}).get("gemm_rate", {})]
        if numpy_rates:  # NumPy's OpenBLAS on the same shapes, for comparison (not the limit: ours does not run it)
            rates["numpy"] = statistics.median(numpy_rates)
    limit = max(rate for name, rate in rates.items() if name != "numpy") if set(rates) - {"numpy"} else None
    row = by_k[str(max(ks))]
    reached = {}
    for side in runs[0]:
        seconds = row[f"{side}_ms_per_micro_batch"] / 1e3
        reached[side] = {"flops_per_second": flops["total"] / seconds,
                         "share_of_limit": None if limit is None else flops["total"] / seconds / limit}
    return {"flops": flops, "gemm_rates": rates, "limit_flops_per_second": limit, "reached": reached,
            "gemm_shapes": runs[0]["ours"].get("gemm_rate", {}).get("by_shape")}


def measure_versus(settings: VersusSettings, log: Log) -> dict[str, Any]:
    started = time.perf_counter()
    cpu_before, load_before, children_before = cpu_ticks(), loadavg(), _children_cpu_seconds()
    variants = environment_variants(settings.environments)
    results: dict[str, Any] = {}
    notes: list[str] = []
    for environment, removed in variants.items():
        if removed is None:
            notes.append(f"no BLAS variable ({', '.join(BLAS_ENVIRONMENT)}) is set: '{environment}' would be "
                         "'as set' again, so it was not run")
            continue
        results[environment] = {}
        for model, ks, b in settings.models:
            results[environment][model] = {}
            for threads in settings.threads:
                runs = []
                for round_index in range(settings.rounds):
                    shift = round_index % len(settings.sides)
                    order = settings.sides[shift:] + settings.sides[:shift]
                    got: dict[str, Any] = {}
                    for side in order:
                        log(f"{environment}: {model}, {threads} thread(s), round {round_index + 1}/{settings.rounds}:"
                            f" {side}")
                        breakdown = settings.breakdown_windows if side == "ours" and round_index == 0 else 0
                        got[side] = _run_side(side, model, ks, b, threads, removed, settings, breakdown)
                    runs.append({side: got[side] for side in settings.sides})
                by_k = summarize_rounds(runs, ks)
                first = runs[0]
                results[environment][model][str(threads)] = {
                    "micro_batch": b,
                    "by_k": by_k,
                    "roofline": _roofline(model, b, ks, runs, by_k),
                    "breakdown": first["ours"].get("breakdown"),
                    "blas": {side: first[side].get("blas") for side in first},
                    "blas_environment": first["ours"]["blas_environment"],
                    "torch_blas": next((first[s]["torch_blas"] for s in first if "torch_blas" in first[s]), None),
                    "compile_seconds": [run["compiled"]["compile_seconds"] for run in runs if "compiled" in run],
                    "thread_settings": {side: first[side]["threads"] for side in first}
                    | {"torch_threads": next((first[s]["torch_threads"] for s in first if s != "ours"), None)},
                    "memory": first["ours"]["memory"],
                    "loadavg_per_process": [[run[s]["loadavg_start"] for s in run] for run in runs],
                    "raw": [{side: run[side]["by_k"] for side in run} for run in runs],
                }
    payload: dict[str, Any] = {
        "benchmark": VERSUS.name, "machine": machine_info(), "settings": asdict(settings),
        "environment": {"loadavg_start": load_before, "loadavg_end": loadavg(),
                        "other_processes_cpu_share": _others_share(cpu_before, children_before, started),
                        "wall_seconds": time.perf_counter() - started, "notes": notes},
        "environments": results,
    }
    payload["faster_environment"] = _faster_environment(results)
    payload["scaling"] = _scaling(results)
    payload["targets"] = _targets(results, payload["scaling"])
    return payload


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


def _sides_of(results: dict[str, Any]) -> list[str]:
    for per_model in results.values():
        for per_threads in per_model.values():
            for data in per_threads.values():
                return [key.removesuffix("_ms_per_micro_batch") for key in next(iter(data["by_k"].values()))
                        if key.endswith("_ms_per_micro_batch")]
    return []


def _faster_environment(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Per model, threads and side: the median ms per micro-batch (over every k) as set and unset."""
    if not {"as set", "unset"} <= set(results):
        return []
    rows = []
    for model, per_threads in results["as set"].items():
        for threads, data in per_threads.items():
            other = results["unset"].get(model, {}).get(threads)
            if other is None:
                continue
            for side in _sides_of(results):
                ms = {name: statistics.median(row[f"{side}_ms_per_micro_batch"] for row in d["by_k"].values())
                      for name, d in (("as set", data), ("unset", other))}
                faster = min(ms, key=lambda name: ms[name])
                rows.append({"model": model, "threads": int(threads), "side": side, "ms_as_set": ms["as set"],
                             "ms_unset": ms["unset"], "faster": faster,
                             "by": max(ms.values()) / min(ms.values())})
    return rows


def _scaling(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Per environment, model and side: ms per micro-batch with 2 threads over 1 (median over the ks)."""
    rows = []
    for environment, per_model in results.items():
        for model, per_threads in per_model.items():
            if not {"1", "2"} <= set(per_threads):
                continue
            for side in _sides_of(results):
                one, two = (statistics.median(row[f"{side}_ms_per_micro_batch"]
                                              for row in per_threads[t]["by_k"].values()) for t in ("1", "2"))
                rows.append({"environment": environment, "model": model, "side": side,
                             "micro_batch": per_threads["1"]["micro_batch"], "ms_1_thread": one, "ms_2_threads": two,
                             "ratio": two / one})
    return rows


def _targets(results: dict[str, Any], scaling: list[dict[str, Any]]) -> list[dict[str, Any]]:
    targets = [
        {"target": f"ours >= {TARGETS[model]}x PyTorch eager items/s", "environment": environment, "model": model,
         "threads": int(threads), "k": int(k), "threshold": TARGETS[model], "measured": row["ratio"]["median"],
         "min": row["ratio"]["min"], "max": row["ratio"]["max"], "met": row["ratio"]["median"] >= TARGETS[model]}
        for environment, per_model in results.items() for model, per_threads in per_model.items() if model in TARGETS
        for threads, data in per_threads.items() for k, row in data["by_k"].items() if "ratio" in row]
    targets += [
        {"target": "stretch: ours >= 1.0x torch.compile items/s", "environment": environment, "model": model,
         "threads": int(threads), "k": int(k), "threshold": 1.0, "measured": row["ratio_compiled"]["median"],
         "min": row["ratio_compiled"]["min"], "max": row["ratio_compiled"]["max"],
         "met": row["ratio_compiled"]["median"] >= 1.0}
        for environment, per_model in results.items() for model, per_threads in per_model.items()
        for threads, data in per_threads.items() for k, row in data["by_k"].items() if "ratio_compiled" in row]
    targets += [
        {"target": f"ours: 2 threads <= {SCALING_TARGET}x the 1-thread ms per micro-batch (b = 32)",
         "environment": s["environment"], "model": s["model"], "threshold": SCALING_TARGET, "measured": s["ratio"],
         "met": s["ratio"] <= SCALING_TARGET}
        for s in scaling if s["side"] == "ours" and s["micro_batch"] == 32]
    return targets


def _kernel_of(data: dict[str, Any], side: str) -> str:
    """The GEMM kernel a side ran: NumPy's OpenBLAS and the kernel it chose; PyTorch's BLAS."""
    if side == "ours":
        numpy_blas = [b for b in data["blas"].get("ours") or [] if b["library"].startswith("numpy")]
        return f"OpenBLAS {numpy_blas[0]['architecture']}" if numpy_blas else "?"
    torch_blas = data.get("torch_blas") or {}
    return f"{torch_blas.get('blas', '?')} ({torch_blas.get('cpu_capability', '?')})"


def format_versus(payload: dict[str, Any]) -> str:
    env = payload["environment"]
    share = env.get("other_processes_cpu_share")
    lines = [machine_line(payload["machine"]),
             f"load average {env['loadavg_start']} at the start, {env['loadavg_end']} at the end; other processes "
             f"used {'?' if share is None else f'{share:.0%}'} of the CPUs meanwhile; each side in its own process",
             *env.get("notes", []), ""]
    rows = []
    for environment, per_model in payload["environments"].items():
        for model, per_threads in per_model.items():
            for threads, data in per_threads.items():
                blas = f"{environment}: ours {_kernel_of(data, 'ours')}, torch {_kernel_of(data, 'torch')}"
                for k, row in data["by_k"].items():
                    sides = [key.removesuffix("_items_per_second") for key in row if key.endswith("_items_per_second")]
                    ratio = row.get("ratio")
                    compiled = row.get("ratio_compiled")
                    spread = "-" if ratio is None else f"{ratio['median']:.2f} ({ratio['min']:.2f}-{ratio['max']:.2f})"
                    rows.append((blas, model, threads, k,
                                 *(f"{row[f'{s}_items_per_second']:,.0f}" if f"{s}_items_per_second" in row else "-"
                                   for s in ("ours", "torch", "compiled")),
                                 spread,
                                 "-" if row.get("cpu_ratio") is None else f"{row['cpu_ratio']['median']:.2f}",
                                 "-" if compiled is None else f"{compiled['median']:.2f}",
                                 " / ".join(f"{row[f'{s}_ms_per_micro_batch']:.1f}" for s in sides)))
    lines += text_table(("BLAS environment and kernel", "model", "threads", "k", "ours items/s", "torch items/s",
                         "compiled items/s", "ours/torch (range)", "by CPU", "ours/compiled",
                         "ms per micro-batch (sides in order)"), rows, numbers_right=True, rule=True)
    lines.append("ours/torch: items/s by wall time, the median of the rounds' ratios (their range); by CPU: the "
                 "same ratio of the processes' CPU seconds, which another process's load moves less")
    lines += _compile_lines(payload)
    lines += _environment_lines(payload) + _scaling_lines(payload) + _roofline_lines(payload)
    lines += _breakdown_lines(payload) + _target_lines(payload)
    return "\n".join(lines)


def _compile_lines(payload: dict[str, Any]) -> list[str]:
    """torch.compile's compile time, apart from its windows: the first micro-batch of each process."""
    lines = []
    for environment, per_model in payload["environments"].items():
        for model, per_threads in per_model.items():
            for threads, data in per_threads.items():
                if data.get("compile_seconds"):
                    seconds = ", ".join(f"{s:.1f}" for s in data["compile_seconds"])
                    lines.append(f"torch.compile (inductor), {environment}, {model}, {threads} thread(s): first "
                                 f"micro-batch (the compile) {seconds} s per process, not in the windows")
    return lines


def _row_lines(payload: dict[str, Any], key: str, heading: str, line: Callable[[dict[str, Any]], str]) -> list[str]:
    """A heading and one line per row of ``payload[key]``; nothing where it holds no rows."""
    rows = payload.get(key) or []
    return ["", heading, *(f"  {line(r)}" for r in rows)] if rows else []


def _environment_lines(payload: dict[str, Any]) -> list[str]:
    return _row_lines(
        payload, "faster_environment",
        "as set or unset (OPENBLAS_CORETYPE, OPENBLAS_L2_SIZE): median ms per micro-batch over the ks",
        lambda r: f"{r['model']}, {r['threads']} thread(s), {r['side']}: as set {r['ms_as_set']:.2f}, unset "
                  f"{r['ms_unset']:.2f}: {r['faster']} is faster by {r['by']:.2f}x")


def _scaling_lines(payload: dict[str, Any]) -> list[str]:
    return _row_lines(
        payload, "scaling", "2 threads against 1: ms per micro-batch (median over the ks)",
        lambda r: f"{r['environment']}, {r['model']} (b = {r['micro_batch']}), {r['side']}: {r['ms_1_thread']:.2f}"
                  f" -> {r['ms_2_threads']:.2f} ms, {r['ratio']:.2f}x")


def _roofline_lines(payload: dict[str, Any]) -> list[str]:
    lines = ["", "roofline at the largest k: the model's FLOPs per micro-batch against the GEMM rate measured on its "
             "own shapes (ours: the native float32 GEMM; torch: PyTorch's BLAS; numpy: NumPy's OpenBLAS, which ours "
             "no longer runs, for comparison; the limit is the faster of ours and torch)"]
    for environment, per_model in payload["environments"].items():
        for model, per_threads in per_model.items():
            for threads, data in per_threads.items():
                r = data["roofline"]
                rates = ", ".join(f"{name} {rate / 1e9:.0f}" for name, rate in r["gemm_rates"].items())
                reached = ", ".join(f"{side} {v['flops_per_second'] / 1e9:.0f} GFLOP/s"
                                    + ("" if v["share_of_limit"] is None else f" ({v['share_of_limit']:.0%})")
                                    for side, v in r["reached"].items())
                lines.append(f"  {environment}, {model}, {threads} thread(s): {r['flops']['total'] / 1e6:.0f} MFLOP "
                             f"per micro-batch ({r['flops']['gemm'] / 1e6:.0f} in GEMMs); GEMM GFLOP/s on these "
                             f"shapes: {rates}; reached: {reached}")
    return lines


def _breakdown_lines(payload: dict[str, Any]) -> list[str]:
    lines = ["", "where ours' milliseconds go (largest k, per micro-batch; wall clock, and the main thread's CPU)"]
    for environment, per_model in payload["environments"].items():
        for model, per_threads in per_model.items():
            for threads, data in per_threads.items():
                b = data.get("breakdown")
                if not b:
                    continue
                parts = "; ".join(f"{name} {ms:.2f} ({b['thread_cpu_ms_per_micro_batch'][name]:.2f})"
                                  for name, ms in b["ms_per_micro_batch"].items())
                lines.append(f"  {environment}, {model}, {threads} thread(s): {b['total_ms']:.2f} ms "
                             f"({b['thread_cpu_ms']:.2f} CPU): {parts}")
    return lines


def _target_lines(payload: dict[str, Any]) -> list[str]:
    lines = ["", "targets (measured side by side in this run; never asserted in a test)"]
    for t in payload["targets"]:
        where = f"{t['environment']}, {t['model']}" + (f", {t['threads']} thread(s), k = {t['k']}" if "k" in t else "")
        lines.append(f"  {'met   ' if t['met'] else 'missed'} {t['target']}: {where}: {t['measured']:.2f}")
    return lines


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sides", default=None,
                        help="comma-separated sides, ours first (default: ours,torch,compiled)")
    parser.add_argument("--threads", default=None, help="comma-separated thread counts (default: 1,2)")
    parser.add_argument("--models", default=None, help="comma-separated models of side.py's CASES (micro-batch 32, "
                        "12 for nanogpt_cpu)")
    parser.add_argument("--environments", default=None, help="comma-separated: 'as set', 'unset'")


def _apply_arguments(settings: VersusSettings, args: argparse.Namespace) -> VersusSettings:
    from benchmarks.end_to_end.side import CASES, SIDES

    if args.repeats is not None:
        settings = replace(settings, rounds=args.repeats)
    if args.sides is not None:
        sides = tuple(s.strip() for s in args.sides.split(","))
        if sides[0] != "ours" or not set(sides) <= set(SIDES):
            raise ValueError(f"--sides must start with ours and name sides of {', '.join(SIDES)}, got {args.sides!r}")
        settings = replace(settings, sides=sides)
    if args.threads is not None:
        settings = replace(settings, threads=tuple(int(t) for t in args.threads.split(",")))
    if args.models is not None:
        chosen = [m.strip() for m in args.models.split(",")]
        unknown = [m for m in chosen if m not in CASES]
        if unknown:
            raise ValueError(f"--models: unknown {', '.join(unknown)}; known: {', '.join(sorted(CASES))}")
        ks = settings.models[0][1]
        settings = replace(settings, models=tuple((m, ks, 12 if m == "nanogpt_cpu" else 32) for m in chosen))
    if args.environments is not None:
        names = tuple(e.strip() for e in args.environments.split(","))
        environment_variants(names)  # refuses an unknown name
        settings = replace(settings, environments=names)
    return settings


VERSUS: Benchmark[VersusSettings] = Benchmark(
    name="end_to_end_versus",
    description="Ours against PyTorch eager and torch.compile, each side in its own process: items/s per k, 1 and 2 "
                "threads, the BLAS environment as set and unset, the roofline and where ours spends a micro-batch.",
    quick_help="the char transformer only, k in {1, 8}, 1 thread, one round, eager PyTorch only, the environment "
               "as set",
    full_settings=full_settings, quick_settings=quick_settings,
    measure=measure_versus, format_table=format_versus,
    add_arguments=_add_arguments, apply_arguments=_apply_arguments,
)
