"""One side of the head-to-head run, alone in its process: ours, PyTorch eager, or PyTorch
compiled (``torch.compile``, inductor on the CPU), one model, windows of every k, each
micro-batch timed by its position in the window.

    python -m benchmarks.end_to_end.side ours char_transformer --ks 1,4,8,16 --micro-batch 32 --windows 4

prints one JSON object on stdout. Alone, neither side's thread pools touch the other's cores:
in one process, OpenBLAS's worker spins ~0.1-0.15 s after our GEMMs and slowed the PyTorch
twin's next micro-batches (issue 19), and libgomp's workers spin after each PyTorch op. The
parent (``versus.py``) gives the thread count and the BLAS variables in the environment
before anything loads, as a user would (``OMP_NUM_THREADS``, ``OPENBLAS_NUM_THREADS``,
``MTA_THREADS``, ``OPENBLAS_CORETYPE``), and ours also sets it the way ``maccum train`` does
(``set_threads``, ``retain_freed_memory``) and runs each micro-batch as the Learner does by
default: captured on its first two calls, replayed after them (``Accumulator.capture``; the
result's ``replay`` counts how each ran).

After its timed windows a side records what the report's roofline needs: the GEMM rate of its
library on the model's shapes (``roofline.gemm_rate``); ours also where its milliseconds go
(``breakdown.ours_breakdown``); the compiled side its compile time (its first micro-batch).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

import numpy as np

from benchmarks.end_to_end.cases import CHARS, DIGITS, NANOGPT_CPU, WIDE, ModelCase

__all__ = ["CASES", "SIDES", "main", "run_side"]

CASES: dict[str, ModelCase] = {case.name: case for case in (DIGITS, WIDE, CHARS, NANOGPT_CPU)}
SIDES = ("ours", "torch", "compiled")
LR, MOMENTUM, SEED = 1e-3, 0.9, 0


def _optimizer_name(case: ModelCase) -> str:
    return str(getattr(case, "optimizer", "sgd"))


def _ours(case: ModelCase, features: np.ndarray, labels: np.ndarray, b: int, max_k: int) -> Any:
    import minitorch_accum as mta
    from minitorch_accum import optim
    from minitorch_accum.accum import Accumulator

    model = case.model("cpu", np.random.default_rng(SEED))
    micro = [(mta.tensor(features[i * b:(i + 1) * b]), mta.tensor(labels[i * b:(i + 1) * b])) for i in range(max_k)]
    acc = Accumulator(model, steps=max_k, fusion="gemm")
    if _optimizer_name(case) == "adamw":
        optimizer: Any = optim.AdamW(LR, betas=(0.9, 0.99), weight_decay=0.1)
    else:
        optimizer = optim.SGD(LR, momentum=MOMENTUM)
    items = b * case.items_per_row
    # as the Learner runs a micro-batch by default: captured on its first calls, replayed after
    step = acc.capture(lambda x, y: case.loss(model, x, y))

    def window(k: int, clock: list[float]) -> None:
        acc.set_steps(k)
        for x, y in micro[:k]:
            acc.backward(step(x, y), num_items=items)
            clock.append(time.perf_counter())
        optimizer.step(model, acc)
        acc.zero()
    window.replay = step  # type: ignore[attr-defined]
    return window


def _torch(case: ModelCase, features: np.ndarray, labels: np.ndarray, b: int, max_k: int, compiled: bool) -> Any:
    import torch

    from benchmarks.end_to_end.torch_twin import TorchTwin

    # the same initial values as ours: the twin copies them from our model
    twin = TorchTwin(torch, case, case.model("cpu", np.random.default_rng(SEED)), features, labels, b, max_k, "cpu",
                     LR, MOMENTUM, _optimizer_name(case))
    optimizer, micro, items = twin.optimizer, twin.micro, float(twin.items)
    model = torch.compile(twin.model) if compiled else twin.model

    def window(k: int, clock: list[float]) -> None:
        for x, y in micro[:k]:
            (case.torch_loss(torch, model, x, y) / (k * items)).backward()
            clock.append(time.perf_counter())
        optimizer.step()
        optimizer.zero_grad()
    return window


def _gemm_rate(side: str, case: ModelCase, b: int) -> dict[str, Any]:
    from benchmarks.end_to_end.roofline import gemm_rate, gemm_shapes

    shapes = gemm_shapes(case, b)
    if side == "ours":
        # the GEMM ours runs (the backend's matmul: the native float32 GEMM), and NumPy's OpenBLAS beside it
        from minitorch_accum.backend.numpy_backend import NumpyBackend

        rate = gemm_rate(shapes, NumpyBackend().matmul, lambda a: a)
        return {"library": "ours", **rate, "numpy": gemm_rate(shapes, np.matmul, lambda a: a)}
    import torch

    return {"library": "torch", **gemm_rate(shapes, torch.mm, torch.from_numpy)}


def run_side(side: str, case: ModelCase, ks: list[int], b: int, windows: int, warmup: int,
             breakdown: int = 0) -> dict[str, Any]:
    """Seconds of each window and of each micro-batch by position, ``windows`` rounds over every k;
    then the GEMM rate on the model's shapes and (ours, ``breakdown`` > 0) where the time goes."""
    from benchmarks.harness.machine import blas_environment, blas_libraries, loadavg
    from minitorch_accum.backend import retain_freed_memory, set_threads, thread_summary

    started_load = loadavg()
    memory = "malloc as it is"
    if side == "ours":
        set_threads()  # the count the parent put in MTA_THREADS, as `maccum train` does
        memory = retain_freed_memory()
    rng = np.random.default_rng(SEED)
    features, labels = case.data(max(ks) * b, rng)
    extra: dict[str, Any] = {}
    if side == "ours":
        window = _ours(case, features, labels, b, max(ks))
        torch_threads = None
    else:
        import torch

        from benchmarks.harness.machine import torch_blas

        window = _torch(case, features, labels, b, max(ks), compiled=side == "compiled")
        set_threads()  # NumPy's BLAS idles here; torch's own pool gets the count
        torch_threads = torch.get_num_threads()
        extra["torch_blas"] = torch_blas(torch)
    by_k: dict[str, Any] = {str(k): {"windows": [], "cpu_windows": [], "positions": [[] for _ in range(k)]}
                            for k in ks}
    for round_index in range(warmup + windows):
        for k in ks if round_index % 2 else list(reversed(ks)):
            cpu = time.process_time()
            clock = [time.perf_counter()]
            window(k, clock)
            end = time.perf_counter()
            if "compile_seconds" not in extra and side == "compiled":
                extra["compile_seconds"] = clock[1] - clock[0]  # the first micro-batch compiles
            if round_index < warmup:
                continue
            entry = by_k[str(k)]
            entry["windows"].append(end - clock[0])
            # CPU seconds of every thread of the process: what the window cost, whatever share of the
            # cores the machine's other processes left it (on a shared machine wall time says little)
            entry["cpu_windows"].append(time.process_time() - cpu)
            for position in range(k):
                entry["positions"][position].append(clock[position + 1] - clock[position])
    if side == "ours":  # how its micro-batches ran: every one after the first two of a shape replays
        extra["replay"] = dict(window.replay.counts)  # type: ignore[attr-defined]
    if side != "compiled":
        extra["gemm_rate"] = _gemm_rate(side, case, b)
    if side == "ours" and breakdown > 0:
        from benchmarks.end_to_end.breakdown import ours_breakdown

        k = max(ks)
        extra["breakdown"] = ours_breakdown(lambda: window(k, []), breakdown, k)
    return {"side": side, "model": case.name, "micro_batch": b, "items_per_micro_batch": b * case.items_per_row,
            "threads": thread_summary(), "torch_threads": torch_threads, "memory": memory,
            "blas": blas_libraries(), "blas_environment": blas_environment(),
            "loadavg_start": started_load, "loadavg_end": loadavg(), "by_k": by_k, **extra}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.end_to_end.side", description=__doc__)
    parser.add_argument("side", choices=SIDES)
    parser.add_argument("model", choices=sorted(CASES))
    parser.add_argument("--ks", default="1,4,8,16")
    parser.add_argument("--micro-batch", type=int, default=32)
    parser.add_argument("--windows", type=int, default=4)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--breakdown", type=int, default=0, help="ours: windows of the largest k to time by category")
    args = parser.parse_args(argv)
    ks = sorted({int(k) for k in args.ks.split(",")})
    result = run_side(args.side, CASES[args.model], ks, args.micro_batch, args.windows, args.warmup, args.breakdown)
    json.dump(result, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
