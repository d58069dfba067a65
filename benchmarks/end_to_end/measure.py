"""End-to-end accumulation benchmark: what accumulation costs inside a real training step.

For each model and each window length k (micro-batch b fixed), one run measures, side by side:

1. the accumulation overhead per micro-batch, for every fusion mode, two ways:
   *differential*, a window through the Accumulator against the same k forwards and plain
   ``loss.backward()`` calls (``windows.py``), timed interleaved with everything else; it
   is negative when the persistent arena is *cheaper* than a fresh gradient per micro-batch
   (a fresh 64 MiB array is page-faulted every time); and *direct*, the seconds inside the
   accumulation kernels (``trace.py``);
2. the peak activation memory of k micro-batches of b against one batch of k*b (``memory.py``);
3. items per second of whole windows (k micro-batches, SGD-momentum step, zero);
4. the same model and loop in PyTorch eager (when torch imports), items/s ratio ours/torch.

The machine may be shared: each timed call also records how much CPU other processes used
meanwhile, and when enough rounds were quiet the medians come from those rounds
(``harness/contention.py``). ``--threads 1`` keeps a run steady while another process holds a core.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import minitorch_accum as mta
from benchmarks.end_to_end.cases import ModelCase
from benchmarks.end_to_end.figures import DEFINITIONS, window_figures
from benchmarks.end_to_end.memory import peak_memory
from benchmarks.end_to_end.settings import Settings, settings_record
from benchmarks.end_to_end.targets import targets
from benchmarks.end_to_end.torch_twin import TorchTwin
from benchmarks.end_to_end.trace import kernel_trace
from benchmarks.end_to_end.windows import Phases, accumulate_window, plain_window
from benchmarks.harness.contention import (
    MIN_QUIET_ROUNDS,
    QUIET_SHARE,
    ContentionTimer,
    cpu_ticks,
    other_cpu_share,
    rounds_for_medians,
)
from benchmarks.harness.machine import blas_threads, loadavg, machine_info
from benchmarks.harness.program import Log
from benchmarks.harness.timing import time_interleaved
from benchmarks.harness.torch_import import import_torch
from minitorch_accum import kernels, optim
from minitorch_accum.accum import Accumulator
from minitorch_accum.backend import backend_for

__all__ = ["BENCHMARK", "measure"]

BENCHMARK = "end_to_end"


def measure(settings: Settings, log: Log) -> dict[str, Any]:
    """Run every model of ``settings``; return the payload of the result file."""
    started = time.perf_counter()
    load_before = loadavg()
    cpu_before = cpu_ticks()
    imported = import_torch(settings.device, match_spin=False) if settings.compare_torch else None
    torch = None if imported is None else imported.module
    with contextlib.ExitStack() as scope:
        if settings.threads is not None:
            from threadpoolctl import threadpool_limits

            # every BLAS and OpenMP pool loaded by now: NumPy's OpenBLAS, the native
            # kernels' and torch's OpenMP
            scope.enter_context(threadpool_limits(limits=settings.threads))
        threads = blas_threads()
        if torch is not None and settings.device == "cpu":
            # same core count as NumPy's BLAS, so neither side gets more cores
            scope.callback(torch.set_num_threads, torch.get_num_threads())
            torch.set_num_threads(threads)
        models = {case.name: _measure_model(case, settings, torch, log) for case in settings.models}
    payload: dict[str, Any] = {
        "benchmark": BENCHMARK,
        "machine": machine_info(),
        "settings": settings_record(settings),
        "environment": {
            # which implementation the library's kernels took (MTA_KERNELS on the CPU)
            "kernel_path": kernels.kernel_path() if settings.device == "cpu" else "cupy",
            "blas_threads": threads,
            "torch_threads": threads if torch is not None and settings.device == "cpu" else None,
            "torch_compared": torch is not None,
            "loadavg_start": load_before,
            "loadavg_end": loadavg(),
            "wall_seconds": time.perf_counter() - started,
            "other_processes_cpu_share": other_cpu_share(cpu_before, started),
        },
        "definitions": DEFINITIONS,
        "models": models,
    }
    payload["targets"] = targets(payload, settings)
    return payload


def _measure_model(case: ModelCase, settings: Settings, torch: Any, log: Log) -> dict[str, Any]:
    b, ks, device = settings.micro_batch, sorted(settings.ks), settings.device
    items = b * case.items_per_row  # what a micro-batch's summed loss counts, and items/s counts
    backend = backend_for(device)
    rng = np.random.default_rng(settings.seed)
    model = case.model(device, rng)
    n_params = sum(p.size for p in model.parameters())
    features, labels = case.data(ks[-1] * b, rng)
    micro = [(mta.tensor(features[i * b:(i + 1) * b], device=device), mta.tensor(labels[i * b:(i + 1) * b],
                                                                                    device=device))
             for i in range(ks[-1])]
    description = case.describe()
    log(f"{case.name}: {description['shape']}, {n_params / 1e6:.2f}M parameters, k in {ks}, b={b} "
        f"({items} items), {case.repeats} repeats")

    twin = (TorchTwin(torch, case, model, features, labels, b, ks[-1], device, settings.lr, settings.momentum)
            if torch is not None else None)
    sync = _sync(backend, twin)
    accs = {f: Accumulator(model, steps=ks[-1], fusion=f) for f in settings.fusions}
    opts = {f: optim.SGD(settings.lr, momentum=settings.momentum) for f in settings.fusions}

    variants: dict[str, Callable[[], None]] = {}
    phases: dict[str, Phases] = {}
    for k in ks:
        variants[f"{k}/plain"] = plain_window(case, model, micro[:k])
        for fusion in settings.fusions:
            phases[f"{k}/{fusion}"] = Phases()
            variants[f"{k}/{fusion}"] = accumulate_window(case, accs[fusion], opts[fusion], micro[:k], items,
                                                          phases[f"{k}/{fusion}"], sync)
        if twin is not None:
            phases[f"{k}/torch"] = Phases()
            variants[f"{k}/torch"] = twin.window(k, phases[f"{k}/torch"], sync)
    log(f"{case.name}: timing {len(variants)} variants interleaved, {case.warmup} warm-up + {case.repeats} rounds")
    timer = ContentionTimer(len(variants), sync)
    samples = time_interleaved(variants, repeats=case.repeats, warmup=case.warmup, timer=timer)
    for entry in phases.values():
        entry.drop_first(case.warmup)
    shares = timer.round_shares()
    basis, basis_name = rounds_for_medians(shares)

    log(f"{case.name}: kernel trace, {settings.trace_windows} window(s) per k and fusion")
    traces = {f: kernel_trace(case, accs[f], micro, ks, items, settings.trace_windows) for f in settings.fusions}
    log(f"{case.name}: peak memory, fusions {settings.memory_fusions}")
    memory = {f: peak_memory(case, model, accs.get(f), features, labels, ks, b, f, device)
              for f in settings.memory_fusions}
    finite = all(math.isfinite(float(p.data.sum())) for p in model.parameters())

    by_k: dict[str, Any] = {}
    for k in ks:
        row = window_figures(k, items, samples, phases, traces, settings.fusions, twin is not None, basis)
        row["plain"]["samples"] = samples[f"{k}/plain"]
        for fusion in settings.fusions:
            ph = phases[f"{k}/{fusion}"]
            row["fusions"][fusion]["samples"] = {"total": samples[f"{k}/{fusion}"], "accumulate": ph.accumulate,
                                                 "update": ph.update}
        if row["torch"] is not None:
            ph = phases[f"{k}/torch"]
            row["torch"]["samples"] = {"total": samples[f"{k}/torch"], "accumulate": ph.accumulate,
                                       "update": ph.update}
        # the same figures over every round, whatever the machine was doing meanwhile
        everything = window_figures(k, items, samples, phases, traces, settings.fusions, twin is not None,
                                    list(range(case.repeats)))
        row["all_rounds"] = {
            "plain_micro_step_seconds": everything["plain"]["micro_step_seconds"],
            "torch_items_per_second": None if everything["torch"] is None else everything["torch"]["items_per_second"],
            "fusions": {f: {key: everything["fusions"][f][key] for key in
                            ("micro_step_seconds", "items_per_second", "overhead_share", "direct_share", "vs_torch")}
                        for f in settings.fusions},
        }
        by_k[str(k)] = row
    return {
        **description,
        "items_per_micro_batch": items,
        "parameters": n_params,
        "parameter_bytes": sum(int(p.data.nbytes) for p in model.parameters()),
        "repeats": case.repeats,
        "warmup": case.warmup,
        "parameters_finite_after": finite,
        "timing": {
            "basis": basis_name,
            "rounds_used": basis,
            "round_other_processes_cpu_share": shares,
            "quiet_threshold": QUIET_SHARE,
            "min_quiet_rounds": MIN_QUIET_ROUNDS,
        },
        "by_k": by_k,
        "memory": memory,
    }


def _sync(backend: Any, twin: TorchTwin | None) -> Callable[[], None]:
    if backend.device.kind == "cpu":
        return lambda: None

    def sync() -> None:
        backend.synchronize()
        if twin is not None:
            twin.synchronize()
    return sync
