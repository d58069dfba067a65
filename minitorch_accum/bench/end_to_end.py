"""End-to-end accumulation benchmark: what accumulation costs inside a real training step.

For each model and each window length k (micro-batch b fixed), one run measures, side by side:

1. the accumulation overhead per micro-batch, for every fusion mode, two ways:

   - *differential*: a window of k micro-batches through the Accumulator (forward,
     ``acc.backward``, and the window close, ``found_nonfinite()``, whose finite check
     of GEMM-written views is accumulation work too) against the same k forwards and
     plain ``loss.backward()`` calls that return a Gradients container and are thrown
     away (no accumulation at all). Timed interleaved with everything else;
     ``overhead share = (t_accumulate - t_plain) / t_accumulate`` per micro-batch,
     from the medians. It is negative when the persistent arena is *cheaper* than a
     fresh gradient per micro-batch (a fresh 64 MiB array is page-faulted every time);
   - *direct*: seconds inside the accumulation kernels, from ``Accumulator(trace=True)``:
     every kernel except the fused GEMMs (add/copy-scale, container adds, finite
     check), plus what a beta = 1 GEMM costs over the beta = 0 GEMM of the same
     parameter, if anything (the GEMM itself replaces the plain backward's
     weight-gradient GEMM, so only its extra read of the buffer is accumulation),
     over the same ``t_accumulate``;

2. the peak activation memory of k micro-batches of b against one batch of k*b,
   measured by the allocator through ``Accumulator.micro_batch()``;
3. items per second of whole windows (k micro-batches, SGD-momentum step, zero);
4. the same model and loop in PyTorch eager (when torch imports), items/s ratio ours/torch.

Results go to ``end_to_end-<date>-<machine>.json`` through the harness, with a plot
beside them; a table of the ratios and the targets is printed at the end.

The machine may be shared. Each timed call also records how much CPU other processes
used meanwhile; when enough rounds were quiet, the medians come from those rounds
(every figure over all rounds stays in the file). ``--threads 1`` keeps a run steady
while another process holds a core.

    python -m minitorch_accum.bench.end_to_end --quick
    maccum bench end-to-end --out /tmp/results
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import math
import os
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np

import minitorch_accum as mta
from minitorch_accum import nn, optim
from minitorch_accum.accum import AccumulationTrace, Accumulator, KernelEvent
from minitorch_accum.backend import backend_for
from minitorch_accum.bench.harness import (
    machine_info,
    machine_tag,
    median,
    results_dir,
    time_interleaved,
    write_results,
)
from minitorch_accum.nn import functional as F

__all__ = [
    "ModelSpec",
    "Settings",
    "full_settings",
    "main",
    "quick_settings",
    "run_end_to_end",
]

BENCHMARK = "end_to_end"

# The targets (issue 7).
OVERHEAD_TARGET = 0.03  # GEMM fusion: accumulation <= 3% of a micro-batch's step, wide MLP
MEMORY_SLACK = 0.10  # peak of k x b <= (1/k + 10%) of the peak of one batch of k*b
TORCH_TARGET = 0.8  # ours >= 0.8x PyTorch eager items/s, wide MLP, k = 8
TARGET_K = 8
# timing rounds in which other processes used at most this share of all cores count as quiet;
# with at least MIN_QUIET_ROUNDS of them, the medians are taken over quiet rounds only
QUIET_SHARE = 0.10
MIN_QUIET_ROUNDS = 3
SHARE_WINDOW_SECONDS = 0.5

Log = Callable[[str], None]


@dataclass(frozen=True)
class ModelSpec:
    """An MLP (Linear-ReLU-...-Linear) of layer widths ``dims`` and the data it reads."""

    name: str
    dims: tuple[int, ...]
    dataset: str  # "digits" (scikit-learn's, 64 features, 10 classes) or "synthetic" (Gaussian inputs)
    repeats: int
    warmup: int

    def __post_init__(self) -> None:
        if len(self.dims) < 2:
            raise ValueError(f"ModelSpec {self.name}: dims needs at least (in, out), got {self.dims}")
        if self.dataset not in ("digits", "synthetic"):
            raise ValueError(f"ModelSpec {self.name}: dataset must be 'digits' or 'synthetic', got {self.dataset!r}")
        if self.dataset == "digits" and (self.dims[0] != 64 or self.dims[-1] != 10):
            raise ValueError(f"ModelSpec {self.name}: digits needs dims (64, ..., 10), got {self.dims}")


@dataclass(frozen=True)
class Settings:
    """Everything a run depends on; recorded in the result file."""

    mode: str
    models: tuple[ModelSpec, ...]
    ks: tuple[int, ...]
    micro_batch: int = 32
    fusions: tuple[str, ...] = ("none", "leaf", "gemm")
    memory_fusions: tuple[str, ...] = ("gemm", "leaf")
    device: str = "cpu"
    compare_torch: bool = True
    trace_windows: int = 2
    lr: float = 1e-3
    momentum: float = 0.9
    seed: int = 0
    target_model: str = "wide_mlp"
    plot: bool = True
    # BLAS/OpenMP threads for the run (None: as configured). On a machine where another
    # process holds a core, a two-thread BLAS waits a scheduler tick at every barrier
    threads: int | None = None


# the digits MLP's windows take milliseconds: many rounds are cheap and steady its medians
DIGITS = ModelSpec("digits_mlp", (64, 128, 10), "digits", repeats=61, warmup=5)
# a round of the wide MLP is 31 micro-batches per variant for k in {1, 2, 4, 8, 16}: about
# 10 s on two idle cores, several times that when another process holds a core
WIDE = ModelSpec("wide_mlp", (1024, 4096, 4096, 10), "synthetic", repeats=7, warmup=1)


def full_settings() -> Settings:
    """Every k of the issue; about 3 minutes on two idle cores, under 10 on a busy machine."""
    return Settings(mode="full", models=(DIGITS, WIDE), ks=(1, 2, 4, 8, 16), trace_windows=2)


def quick_settings() -> Settings:
    """Under two minutes on two cores: k in {1, 8}, few repeats of the wide model."""
    return Settings(mode="quick", models=(replace(DIGITS, repeats=31, warmup=3), replace(WIDE, repeats=3, warmup=1)),
                    ks=(1, 8), trace_windows=1)


# ----------------------------------------------------------------- the run
def run_end_to_end(settings: Settings, out: str | os.PathLike | None = None,
                   log: Log | None = None) -> tuple[dict[str, Any], Path]:
    """Run every model of ``settings``; write JSON (and the plot) under ``out``.

    Returns the payload and the path of the dated JSON file."""
    log = log or (lambda _: None)
    if settings.device != "cpu" and not mta.cuda_available():
        raise RuntimeError(f"device {settings.device!r} requested but no CUDA device is usable (cuda_available())")
    started = time.perf_counter()
    load_before = _loadavg()
    cpu_before = _cpu_ticks()
    torch = _import_torch() if settings.compare_torch else None
    with contextlib.ExitStack() as scope:
        if settings.threads is not None:
            from threadpoolctl import threadpool_limits

            # every BLAS and OpenMP pool loaded by now: NumPy's OpenBLAS, the native
            # kernels' and torch's OpenMP
            scope.enter_context(threadpool_limits(limits=settings.threads))
        blas_threads = _blas_threads()
        if torch is not None and settings.device == "cpu":
            # same core count as NumPy's BLAS, so neither side gets more cores
            scope.callback(torch.set_num_threads, torch.get_num_threads())
            torch.set_num_threads(blas_threads)
        models = {spec.name: _bench_model(spec, settings, torch, log) for spec in settings.models}
    payload: dict[str, Any] = {
        "benchmark": BENCHMARK,
        "machine": machine_info(),
        "settings": _settings_dict(settings),
        "environment": {
            "blas_threads": blas_threads,
            "torch_threads": blas_threads if torch is not None and settings.device == "cpu" else None,
            "torch_compared": torch is not None,
            "loadavg_start": load_before,
            "loadavg_end": _loadavg(),
            "wall_seconds": time.perf_counter() - started,
            "other_processes_cpu_share": _other_cpu_share(cpu_before, started),
        },
        "definitions": DEFINITIONS,
        "models": models,
    }
    payload["targets"] = _targets(payload, settings)
    path = write_results(BENCHMARK, payload, out)
    if settings.plot:
        plot = _plot(payload, path.parent)
        if plot is not None:
            log(f"plot: {plot}")
    return payload, path


DEFINITIONS = {
    "micro_step_seconds": "median over interleaved rounds of (k micro-batches through the Accumulator, forward + "
                          "acc.backward, plus the window close acc.found_nonfinite()) / k",
    "plain_micro_step_seconds": "median of (k forwards + loss.backward() returning a Gradients container that is "
                                "dropped: no accumulation) / k",
    "overhead_share": "(micro_step_seconds - plain_micro_step_seconds) / micro_step_seconds; negative when the "
                      "accumulating path is faster than a plain backward",
    "overhead_share_paired": "median over rounds of the same ratio taken within each round",
    "direct_share": "(seconds in accumulation kernels per micro-batch, from Accumulator(trace=True): every kernel "
                    "but the fused GEMMs, plus the beta=1 GEMMs' time over beta=0 GEMMs of the same parameter) / "
                    "micro_step_seconds",
    "items_per_second": "k*b / median seconds of a whole window: k micro-batches, window close, optimizer step "
                        "(SGD momentum), acc.zero()",
    "torch": "PyTorch eager, same init, loss = cross_entropy(reduction='sum') / (k*b) per micro-batch, .backward() "
             "accumulating into .grad, SGD(momentum).step() and zero_grad() per window",
    "timing_basis": "medians are taken over the rounds in which other processes used at most "
                    f"{QUIET_SHARE:.0%} of all cores, when there are at least {MIN_QUIET_ROUNDS} such rounds, and "
                    "over every round otherwise; 'all_rounds' holds the main figures over every round",
    "memory_ratio": "max peak bytes of the k micro-batches of a window / peak bytes of one batch of k*b, each "
                    "measured by the allocator (tracemalloc on the CPU, a CuPy memory hook on a GPU) around forward "
                    "+ backward through Accumulator.micro_batch()",
}


# ------------------------------------------------------------ one model
@dataclass
class _Phases:
    """Seconds of the accumulate and update parts of each call of one timed variant."""

    accumulate: list[float] = field(default_factory=list)
    update: list[float] = field(default_factory=list)


def _bench_model(spec: ModelSpec, settings: Settings, torch: Any, log: Log) -> dict[str, Any]:
    b, ks, device = settings.micro_batch, sorted(settings.ks), settings.device
    backend = backend_for(device)
    rng = np.random.default_rng(settings.seed)
    layers = _layers(spec.dims, device, rng)
    model = nn.Sequential(*layers)
    n_params = sum(p.size for p in model.parameters())
    features, labels = _data(spec, ks[-1] * b, rng)
    micro = [(mta.tensor(features[i * b:(i + 1) * b], device=device), mta.tensor(labels[i * b:(i + 1) * b],
                                                                                    device=device))
             for i in range(ks[-1])]
    log(f"{spec.name}: dims {spec.dims}, {n_params / 1e6:.2f}M parameters, k in {ks}, b={b}, "
        f"{spec.repeats} repeats")

    torch_side = _TorchTwin(torch, layers, features, labels, b, ks[-1], settings) if torch is not None else None
    sync = _sync(backend, torch_side)
    accs = {f: Accumulator(model, steps=ks[-1], fusion=f) for f in settings.fusions}
    opts = {f: optim.SGD(settings.lr, momentum=settings.momentum) for f in settings.fusions}

    def plain(k: int) -> Callable[[], None]:
        def window() -> None:
            for x, y in micro[:k]:
                F.cross_entropy(model(x), y, reduction="sum").backward()
        return window

    def ours(k: int, fusion: str, phases: _Phases) -> Callable[[], None]:
        acc, opt = accs[fusion], opts[fusion]

        def window() -> None:
            start = time.perf_counter()
            acc.set_steps(k)
            for x, y in micro[:k]:
                acc.backward(F.cross_entropy(model(x), y, reduction="sum"), num_items=b)
            acc.found_nonfinite()
            sync()
            closed = time.perf_counter()
            opt.step(model, acc)
            acc.zero()
            sync()
            phases.accumulate.append(closed - start)
            phases.update.append(time.perf_counter() - closed)
        return window

    variants: dict[str, Callable[[], None]] = {}
    phases: dict[str, _Phases] = {}
    for k in ks:
        variants[f"{k}/plain"] = plain(k)
        for fusion in settings.fusions:
            phases[f"{k}/{fusion}"] = _Phases()
            variants[f"{k}/{fusion}"] = ours(k, fusion, phases[f"{k}/{fusion}"])
        if torch_side is not None:
            phases[f"{k}/torch"] = _Phases()
            variants[f"{k}/torch"] = torch_side.window(k, phases[f"{k}/torch"], sync)
    log(f"{spec.name}: timing {len(variants)} variants interleaved, {spec.warmup} warm-up + {spec.repeats} rounds")
    timer = _ContentionTimer(variants, sync)
    samples = time_interleaved(variants, repeats=spec.repeats, warmup=spec.warmup, timer=timer)
    for entry in phases.values():  # the warm-up calls logged phases too
        del entry.accumulate[:spec.warmup], entry.update[:spec.warmup]
    shares = timer.round_shares()
    quiet = [i for i, share in enumerate(shares) if share is not None and share <= QUIET_SHARE]
    every = list(range(spec.repeats))
    basis = quiet if len(quiet) >= MIN_QUIET_ROUNDS else every

    log(f"{spec.name}: kernel trace, {settings.trace_windows} window(s) per k and fusion")
    traces = {f: _trace(accs[f], micro, ks, settings.trace_windows) for f in settings.fusions}
    log(f"{spec.name}: peak memory, fusions {settings.memory_fusions}")
    memory = {f: _memory(model, accs.get(f), features, labels, ks, b, f, device) for f in settings.memory_fusions}
    finite = all(math.isfinite(float(p.data.sum())) for p in model.parameters())

    by_k: dict[str, Any] = {}
    for k in ks:
        row = _figures(k, b, samples, phases, traces, settings.fusions, torch_side is not None, basis)
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
        everything = _figures(k, b, samples, phases, traces, settings.fusions, torch_side is not None, every)
        row["all_rounds"] = {
            "plain_micro_step_seconds": everything["plain"]["micro_step_seconds"],
            "torch_items_per_second": None if everything["torch"] is None else everything["torch"]["items_per_second"],
            "fusions": {f: {key: everything["fusions"][f][key] for key in
                            ("micro_step_seconds", "items_per_second", "overhead_share", "direct_share", "vs_torch")}
                        for f in settings.fusions},
        }
        by_k[str(k)] = row
    return {
        "dims": list(spec.dims),
        "dataset": spec.dataset,
        "parameters": n_params,
        "parameter_bytes": sum(int(p.data.nbytes) for p in model.parameters()),
        "repeats": spec.repeats,
        "warmup": spec.warmup,
        "parameters_finite_after": finite,
        "timing": {
            "basis": "quiet rounds" if basis is quiet else "all rounds",
            "rounds_used": basis,
            "round_other_processes_cpu_share": shares,
            "quiet_threshold": QUIET_SHARE,
            "min_quiet_rounds": MIN_QUIET_ROUNDS,
        },
        "by_k": by_k,
        "memory": memory,
    }


def _figures(k: int, b: int, samples: dict[str, list[float]], phases: dict[str, _Phases],
             traces: dict[str, dict[str, Any]], fusions: tuple[str, ...], has_torch: bool,
             rounds: list[int]) -> dict[str, Any]:
    """Every timing figure of window length ``k``, from the medians over ``rounds``."""

    def med(values: list[float]) -> float:
        return median([values[i] for i in rounds])

    plain = samples[f"{k}/plain"]
    plain_micro = med(plain) / k
    row: dict[str, Any] = {"plain": {"micro_step_seconds": plain_micro}, "fusions": {}, "torch": None}
    torch_ips = None
    if has_torch:
        ph = phases[f"{k}/torch"]
        torch_ips = k * b / med(samples[f"{k}/torch"])
        row["torch"] = {"window_seconds": med(samples[f"{k}/torch"]), "micro_step_seconds": med(ph.accumulate) / k,
                        "update_seconds": med(ph.update), "items_per_second": torch_ips}
    for fusion in fusions:
        ph = phases[f"{k}/{fusion}"]
        total = samples[f"{k}/{fusion}"]
        micro_step = med(ph.accumulate) / k
        paired = [(ph.accumulate[i] - plain[i]) / ph.accumulate[i] for i in rounds]
        trace = traces[fusion][str(k)]
        # a beta = 1 GEMM cannot be cheaper than beta = 0 in principle (OpenBLAS even zeroes
        # C in a pass of its own for beta = 0): a negative difference counts as zero
        direct_seconds = trace["accumulation_seconds_per_micro_batch"] + max(0.0, trace["gemm_beta1_extra_seconds"])
        ips = k * b / med(total)
        row["fusions"][fusion] = {
            "micro_step_seconds": micro_step,
            "window_seconds": med(total),
            "update_seconds": med(ph.update),
            "items_per_second": ips,
            "overhead_seconds_per_micro_batch": micro_step - plain_micro,
            "overhead_share": (micro_step - plain_micro) / micro_step,
            "overhead_share_paired": median(paired),
            "direct_seconds_per_micro_batch": direct_seconds,
            "direct_share": direct_seconds / micro_step,
            "vs_torch": ips / torch_ips if torch_ips else None,
            "trace": trace,
        }
    return row


class _ContentionTimer:
    """Wall-clock timer for ``time_interleaved`` that also notes how much CPU *other*
    processes used during each call.

    The machine may be shared: when another process holds one of two cores, a
    two-thread BLAS or OpenMP region waits a scheduler tick at every barrier and a
    step takes several times longer. Rounds in which other processes kept more than
    ``QUIET_SHARE`` of the cores busy can then be told apart from quiet ones."""

    def __init__(self, variants: dict[str, Callable[[], None]], sync: Callable[[], None]) -> None:
        self.count = len(variants)
        self.sync = sync
        self.calls: list[tuple[float, float | None]] = []  # (wall seconds, others' CPU seconds)

    def __call__(self, fn: Callable[[], Any]) -> float:
        before = _cpu_ticks()
        self.sync()
        start = time.perf_counter()
        fn()
        self.sync()
        wall = time.perf_counter() - start
        after = _cpu_ticks()
        self.calls.append((wall, _others_cpu_seconds(before, after)))
        return wall

    def round_shares(self) -> list[float | None]:
        """Others' share of all cores during each timed round (None where unknown); the
        harness runs its warm-up rounds without the timer.

        /proc/stat counts busy time in 10 ms ticks while a process's own CPU time is exact,
        so an interval of a few ticks reads tens of percent either way: consecutive rounds
        are pooled until they last ``SHARE_WINDOW_SECONDS``, and each gets its pool's share."""
        cores = os.cpu_count() or 1
        rounds = [self.calls[i:i + self.count] for i in range(0, len(self.calls), self.count)]
        shares: list[float | None] = []
        pool: list[list[tuple[float, float | None]]] = []
        for index, calls in enumerate(rounds):
            pool.append(calls)
            wall = sum(w for r in pool for w, _ in r)
            if wall < SHARE_WINDOW_SECONDS and index < len(rounds) - 1:
                continue
            others = [o for r in pool for _, o in r]
            share = None if None in others or wall <= 0 else max(0.0, sum(o or 0.0 for o in others)) / (wall * cores)
            shares += [share] * len(pool)
            pool = []
        return shares


def _layers(dims: tuple[int, ...], device: str, rng: np.random.Generator) -> list[nn.Module]:
    layers: list[nn.Module] = []
    for i, (fan_in, fan_out) in enumerate(pairwise(dims)):
        layers.append(nn.Linear(fan_in, fan_out, device=device, rng=rng))
        if i < len(dims) - 2:
            layers.append(nn.ReLU())
    return layers


def _data(spec: ModelSpec, count: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``count`` items: micro-batch i of a window is rows [i*b, (i+1)*b), so k micro-batches
    cover exactly the rows of the big batch of k*b they are compared with."""
    if spec.dataset == "digits":
        from minitorch_accum.data import load_digits

        features, labels = load_digits().arrays
        if count > len(features):
            raise ValueError(f"{spec.name}: k*b = {count} is more than the {len(features)} digits")
        order = rng.permutation(len(features))[:count]
        return np.ascontiguousarray(features[order]), labels[order]
    features = rng.standard_normal((count, spec.dims[0]), dtype=np.float32)
    return features, rng.integers(0, spec.dims[-1], size=count)


def _sync(backend: Any, torch_side: _TorchTwin | None) -> Callable[[], None]:
    if backend.device.kind == "cpu":
        return lambda: None

    def sync() -> None:
        backend.synchronize()
        if torch_side is not None:
            torch_side.synchronize()
    return sync


# -------------------------------------------------------------- the trace
_GEMM_KERNELS = ("gemm-beta0", "gemm-beta1", "gemm-fallback")


def _trace(acc: Accumulator, micro: list[tuple[Any, Any]], ks: list[int], windows: int) -> dict[str, Any]:
    """Per-kernel seconds per micro-batch, for each k, from ``acc`` with a trace attached.

    The accumulator of the timed runs is reused (its arena is already paged in); the
    trace is attached only here because recording costs time of its own."""
    acc.trace = AccumulationTrace()
    out: dict[str, Any] = {}
    b = int(micro[0][1].shape[0])
    try:
        for k in ks:
            acc.set_steps(k)
            before, started = _cpu_ticks(), time.perf_counter()
            for _ in range(max(1, windows)):
                _plain_window(acc, micro[:k], b)
            out[str(k)] = _summarize_trace(acc.trace.events, max(1, windows) * k)
            out[str(k)]["other_processes_cpu_share"] = _other_cpu_share(before, started)
            acc.trace.clear()
    finally:
        acc.trace = None
    return out


def _plain_window(acc: Accumulator, micro: list[tuple[Any, Any]], b: int) -> None:
    for x, y in micro:
        acc.backward(F.cross_entropy(acc.model(x), y, reduction="sum"), num_items=b)
    acc.found_nonfinite()
    acc.zero()


def _summarize_trace(events: list[KernelEvent], micro_batches: int) -> dict[str, Any]:
    kernels: dict[str, dict[str, float]] = {}
    for e in events:
        row = kernels.setdefault(e.kernel, {"calls": 0, "seconds": 0.0, "bytes": 0})
        row["calls"] += 1
        row["seconds"] += e.seconds
        row["bytes"] += e.bytes
    per_kernel = {
        name: {
            "calls_per_micro_batch": row["calls"] / micro_batches,
            "seconds_per_micro_batch": row["seconds"] / micro_batches,
            "bytes_per_micro_batch": row["bytes"] / micro_batches,
            "gb_per_second": row["bytes"] / row["seconds"] / 1e9 if row["seconds"] > 0 else None,
        }
        for name, row in sorted(kernels.items())
    }
    accumulation = sum(r["seconds"] for n, r in kernels.items() if n not in _GEMM_KERNELS) / micro_batches
    gemm = sum(r["seconds"] for n, r in kernels.items() if n in _GEMM_KERNELS) / micro_batches
    # beta = 1 re-reads the buffer the plain backward would not; the rest of the GEMM is the
    # weight gradient the plain backward computes anyway. Compare per parameter, since the
    # GEMMs of different layers differ by orders of magnitude.
    by_param: dict[str, dict[str, list[float]]] = {}
    for e in events:
        if e.kernel in ("gemm-beta0", "gemm-beta1"):
            by_param.setdefault(e.param, {"gemm-beta0": [], "gemm-beta1": []})[e.kernel].append(e.seconds)
    beta1_extra = 0.0
    for times in by_param.values():
        if times["gemm-beta0"] and times["gemm-beta1"]:
            extra = median(times["gemm-beta1"]) - median(times["gemm-beta0"])
            beta1_extra += extra * len(times["gemm-beta1"])
    return {
        "kernels": per_kernel,
        "accumulation_seconds_per_micro_batch": accumulation,
        "gemm_seconds_per_micro_batch": gemm,
        "gemm_beta1_extra_seconds": beta1_extra / micro_batches,
    }


# ------------------------------------------------------------- the memory
def _memory(model: nn.Module, acc: Accumulator | None, features: np.ndarray, labels: np.ndarray, ks: list[int],
            b: int, fusion: str, device: str) -> dict[str, Any]:
    """Peak bytes of each micro-batch of a k x b window and of one batch of k*b."""
    acc = acc or Accumulator(model, steps=ks[-1], fusion=fusion)
    # one micro-batch under the probe first: first calls allocate caches once (dtype names,
    # kernel tables), which belong to no micro-batch
    acc.set_steps(1)
    with acc.micro_batch():
        acc.backward(F.cross_entropy(model(mta.tensor(features[:b], device=device)),
                                     mta.tensor(labels[:b], device=device), reduction="sum"), num_items=b)
    acc.found_nonfinite()
    acc.zero()
    out: dict[str, Any] = {}
    for k in ks:
        micro = [(mta.tensor(features[i * b:(i + 1) * b], device=device),
                  mta.tensor(labels[i * b:(i + 1) * b], device=device)) for i in range(k)]
        big_x = mta.tensor(features[:k * b], device=device)
        big_y = mta.tensor(labels[:k * b], device=device)
        acc.set_steps(k)
        peaks = []
        # the graph frees itself by reference counting; a collection of older cyclic garbage
        # in the middle of a measurement would only lower its peak, so none may run there
        gc.collect()
        gc.disable()
        try:
            for x, y in micro:
                with acc.micro_batch() as probe:
                    acc.backward(F.cross_entropy(model(x), y, reduction="sum"), num_items=b)
                peaks.append(probe.peak_bytes)
            acc.found_nonfinite()
            acc.zero()
            acc.set_steps(1)
            with acc.micro_batch() as probe:
                acc.backward(F.cross_entropy(model(big_x), big_y, reduction="sum"), num_items=k * b)
            big = probe.peak_bytes
            acc.found_nonfinite()
            acc.zero()
        finally:
            gc.enable()
        out[str(k)] = {
            "micro_batch_peak_bytes": max(peaks),
            "micro_batch_peaks": peaks,
            "full_batch_peak_bytes": big,
            "ratio": max(peaks) / big if big else None,
            "ideal_ratio": 1.0 / k,
            "target_ratio": 1.0 / k + MEMORY_SLACK / k,
        }
    return out


# ------------------------------------------------------------------ torch
class _TorchTwin:
    """The same MLP, initial values and window loop in PyTorch eager."""

    def __init__(self, torch: Any, layers: list[nn.Module], features: np.ndarray, labels: np.ndarray, b: int,
                 max_k: int, settings: Settings) -> None:
        self.torch = torch
        self.device = "cuda" if settings.device != "cpu" else "cpu"
        modules = []
        for layer in layers:
            if isinstance(layer, nn.Linear):
                twin = torch.nn.Linear(layer.in_features, layer.out_features, bias=layer.bias is not None)
                with torch.no_grad():
                    # ours stores the weight (in, out), torch (out, in)
                    weight = np.ascontiguousarray(layer.weight._backend.to_host(layer.weight.data).T)
                    twin.weight.copy_(torch.from_numpy(weight))
                    if layer.bias is not None:
                        twin.bias.copy_(torch.from_numpy(np.asarray(layer.bias._backend.to_host(layer.bias.data))))
                modules.append(twin)
            else:
                modules.append(torch.nn.ReLU())
        self.model = torch.nn.Sequential(*modules).to(self.device)
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=settings.lr, momentum=settings.momentum)
        self.micro = [(torch.from_numpy(features[i * b:(i + 1) * b]).to(self.device),
                       torch.from_numpy(labels[i * b:(i + 1) * b].astype(np.int64)).to(self.device))
                      for i in range(max_k)]
        self.b = b

    def synchronize(self) -> None:
        if self.device == "cuda":
            self.torch.cuda.synchronize()

    def window(self, k: int, phases: _Phases, sync: Callable[[], None]) -> Callable[[], None]:
        cross_entropy = self.torch.nn.functional.cross_entropy
        model, optimizer, micro, items = self.model, self.optimizer, self.micro[:k], float(k * self.b)

        def run() -> None:
            start = time.perf_counter()
            for x, y in micro:
                (cross_entropy(model(x), y, reduction="sum") / items).backward()
            sync()
            stepped = time.perf_counter()
            optimizer.step()
            optimizer.zero_grad()
            sync()
            phases.accumulate.append(stepped - start)
            phases.update.append(time.perf_counter() - stepped)
        return run


def _import_torch() -> Any:
    try:
        import torch
    except Exception:
        return None
    return torch


def _blas_threads() -> int:
    """Threads of the BLAS NumPy's matmul uses (NumPy's bundled OpenBLAS when present)."""
    try:
        from threadpoolctl import threadpool_info

        blas = [i for i in threadpool_info() if i.get("user_api") == "blas"]
        ours = [i for i in blas if "numpy" in str(i.get("filepath", ""))] or blas
        if ours:
            return int(ours[0]["num_threads"])
    except Exception:
        pass
    return os.cpu_count() or 1


def _cpu_ticks() -> tuple[int, float] | None:
    """Busy clock ticks of the whole machine and this process's CPU seconds, or None off Linux."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    except OSError:
        return None
    idle = int(fields[3]) + int(fields[4])  # idle + iowait
    times = os.times()
    return sum(int(f) for f in fields[:8]) - idle, times.user + times.system


def _others_cpu_seconds(before: tuple[int, float] | None, after: tuple[int, float] | None) -> float | None:
    """CPU seconds the rest of the machine used between two ``_cpu_ticks()`` readings (clock
    ticks are 10 ms, so a short interval reads 0 or a tick too much)."""
    if before is None or after is None:
        return None
    busy = (after[0] - before[0]) / os.sysconf("SC_CLK_TCK")
    # not clipped at 0: the tick error of short intervals must be able to cancel out in sums
    return busy - (after[1] - before[1])


def _other_cpu_share(before: tuple[int, float] | None, started: float) -> float | None:
    """Share of the machine's cores that *other* processes kept busy since ``started``."""
    others = _others_cpu_seconds(before, _cpu_ticks())
    if others is None:
        return None
    return max(0.0, others) / ((time.perf_counter() - started) * (os.cpu_count() or 1))


def _loadavg() -> list[float] | None:
    try:
        return list(os.getloadavg())
    except OSError:
        return None


def _settings_dict(settings: Settings) -> dict[str, Any]:
    data = asdict(settings)
    data["models"] = [asdict(m) | {"dims": list(m.dims)} for m in settings.models]
    return data


# ---------------------------------------------------------------- targets
def _target_k(ks: list[int]) -> int:
    return TARGET_K if TARGET_K in ks else max(ks)


def _targets(payload: dict[str, Any], settings: Settings) -> list[dict[str, Any]]:
    """Each of the issue's targets: the figure it is judged on, the threshold, met or not."""
    ks = sorted(settings.ks)
    k_target = _target_k(ks)
    targets: list[dict[str, Any]] = []
    model = payload["models"].get(settings.target_model)
    if model is not None:
        if "gemm" in settings.fusions:
            # the worst k that accumulates (k >= 2); k = 1 only copies into the arena
            accumulating = [k for k in ks if k >= 2] or ks
            for suffix, key, how in (("", "overhead_share", "differential: against a plain backward"),
                                     ("_direct", "direct_share", "direct: accumulation kernels in the trace")):
                shares = {k: model["by_k"][str(k)]["fusions"]["gemm"][key] for k in accumulating}
                worst = max(shares, key=lambda k: shares[k])
                targets.append({
                    "name": f"gemm_accumulation_overhead{suffix}",
                    "description": f"GEMM fusion: accumulation overhead per micro-batch <= 3% of the step ({how}; "
                                   "the worst k >= 2)",
                    "model": settings.target_model, "fusion": "gemm", "k": worst,
                    "threshold": OVERHEAD_TARGET, "comparison": "<=",
                    "measured": shares[worst], "met": shares[worst] <= OVERHEAD_TARGET,
                    "measured_by_k": {str(k): v for k, v in shares.items()},
                })
        for fusion in ("gemm", "leaf"):
            if fusion not in settings.fusions:
                continue
            row = model["by_k"][str(k_target)]
            ratio = row["fusions"][fusion]["vs_torch"]
            targets.append({
                "name": f"items_per_second_vs_torch_{fusion}",
                "description": f"ours ({fusion} fusion) >= 0.8x PyTorch eager items/s at k={k_target}",
                "model": settings.target_model, "fusion": fusion, "k": k_target,
                "threshold": TORCH_TARGET, "comparison": ">=",
                "measured": ratio, "met": None if ratio is None else ratio >= TORCH_TARGET,
            })
    for name, data in payload["models"].items():
        for fusion, by_k in data["memory"].items():
            entry = by_k[str(k_target)]
            ratio = entry["ratio"]
            targets.append({
                "name": f"peak_memory_ratio_{fusion}",
                "description": f"peak activation memory of {k_target} x {settings.micro_batch} <= "
                               f"(1/{k_target} + 10%) of one batch of {k_target * settings.micro_batch}",
                "model": name, "fusion": fusion, "k": k_target,
                "threshold": entry["target_ratio"], "comparison": "<=",
                "measured": ratio, "met": None if ratio is None else ratio <= entry["target_ratio"],
            })
    return targets


# ------------------------------------------------------------------ output
def format_table(payload: dict[str, Any]) -> str:
    """The ratios of every model and k, then the targets, as plain text."""
    env = payload["environment"]
    others = env.get("other_processes_cpu_share")
    lines: list[str] = [
        f"{payload['machine'].get('cpu')}, {payload['machine'].get('cores')} cores, BLAS threads "
        f"{env['blas_threads']}, torch threads {env['torch_threads']}, other processes used "
        f"{'?' if others is None else f'{others:.0%}'} of the cores meanwhile",
        "",
    ]
    header = ("k", "variant", "ms/micro", "overhead", "direct", "items/s", "x torch", "mem ratio")
    for name, model in payload["models"].items():
        dims = "-".join(str(d) for d in model["dims"])
        lines.append(f"{name} ({dims}, {model['parameters'] / 1e6:.2f}M parameters, "
                     f"b={payload['settings']['micro_batch']})")
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
        lines += _columns(header, rows)
        lines.append("")
    lines.append("targets")
    target_rows = []
    for t in payload["targets"]:
        measured = "n/a" if t["measured"] is None else (f"{t['measured'] * 100:+.2f}%" if "overhead" in t["name"]
                                                        else f"{t['measured']:.3f}")
        threshold = f"{t['threshold'] * 100:.1f}%" if "overhead" in t["name"] else f"{t['threshold']:.4f}"
        met = {True: "met", False: "MISSED", None: "n/a"}[t["met"]]
        target_rows.append((t["name"], t["model"], str(t["k"]), measured, f"{t['comparison']} {threshold}", met))
    lines += _columns(("target", "model", "k", "measured", "threshold", ""), target_rows)
    lines.append("")
    lines.append("overhead = (t_accumulate - t_plain_backward) / t_accumulate per micro-batch (medians of interleaved "
                 "rounds); direct = accumulation kernels from the trace / t_accumulate")
    return "\n".join(lines)


def _columns(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> list[str]:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    out = ["  ".join(h.rjust(w) if i else h.ljust(w) for i, (h, w) in enumerate(zip(header, widths, strict=True)))]
    out.append("  ".join("-" * w for w in widths))
    for r in rows:
        out.append("  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True))))
    return out


def _plot(payload: dict[str, Any], directory: Path) -> Path | None:
    """items/s against k (one line per fusion, torch dashed) and the memory ratio against k
    (with the ideal 1/k), one column per model."""
    try:
        # a Figure without pyplot: no backend switch, no global state in the caller's process
        from matplotlib.figure import Figure
        from matplotlib.ticker import NullLocator
    except Exception:
        return None
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
    machine = machine_tag(payload)
    fig.suptitle(f"end-to-end accumulation, b={payload['settings']['micro_batch']}, "
                 f"{payload['machine'].get('cpu', '')}", fontsize=9)
    fig.tight_layout()
    path = directory / f"{BENCHMARK}-latest-{machine}.png"
    fig.savefig(path, dpi=110)
    return path


# -------------------------------------------------------------------- CLI
def _parse_ints(text: str) -> tuple[int, ...]:
    try:
        values = tuple(sorted({int(v) for v in text.split(",") if v.strip()}))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not values or min(values) <= 0:
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return values


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="maccum bench end-to-end", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="k in {1, 8}, few repeats (under two minutes on 2 cores)")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--out", default=None, help="directory for the JSON and PNG (default benchmarks/results)")
    parser.add_argument("--ks", type=_parse_ints, default=None, help="window lengths, e.g. 1,2,4,8,16")
    parser.add_argument("--repeats", type=int, default=None, help="timed rounds for every model")
    parser.add_argument("--models", default=None, help="comma-separated subset of: digits_mlp, wide_mlp")
    parser.add_argument("--no-torch", action="store_true", help="skip the PyTorch eager comparison")
    parser.add_argument("--threads", type=int, default=None,
                        help="limit NumPy's BLAS, OpenMP and torch to N threads (default: as configured); "
                             "1 keeps timings steady on a machine that other processes share")
    parser.add_argument("--no-plot", action="store_true")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    for option, value in (("--threads", args.threads), ("--repeats", args.repeats)):
        if value is not None and value <= 0:
            print(f"maccum bench end-to-end: {option} must be positive, got {value}", file=sys.stderr)
            return 2
    settings = quick_settings() if args.quick else full_settings()
    if args.models:
        wanted = [m.strip() for m in args.models.split(",") if m.strip()]
        known = {m.name: m for m in settings.models}
        unknown = [m for m in wanted if m not in known]
        if unknown:
            print(f"maccum bench end-to-end: unknown model(s) {', '.join(unknown)}; choose from "
                  f"{', '.join(known)}", file=sys.stderr)
            return 2
        settings = replace(settings, models=tuple(known[m] for m in wanted))
    if args.repeats is not None:
        settings = replace(settings, models=tuple(replace(m, repeats=args.repeats) for m in settings.models))
    if args.ks is not None:
        settings = replace(settings, ks=args.ks)
    settings = replace(settings, device=args.device, compare_torch=not args.no_torch, plot=not args.no_plot,
                       threads=args.threads)
    if args.device == "cuda" and not mta.cuda_available():
        print("maccum bench end-to-end: --device cuda, but no CUDA device is usable (CuPy and a GPU are needed)",
              file=sys.stderr)
        return 2

    start = time.perf_counter()

    def log(message: str) -> None:
        print(f"[{time.perf_counter() - start:6.1f}s] {message}", file=sys.stderr, flush=True)

    payload, path = run_end_to_end(settings, results_dir(args.out), log)
    print(format_table(payload))
    print(f"\nresults: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
