"""What each rank runs (``mpiexec -n R python -m mpi4py -m benchmarks.all_reduce.rank_program
SETTINGS.json OUT.json``): the arena's all-reduce, a same-size copy, and optimizer steps.

All ranks time the same calls; the times of a collective are the slowest rank's (a
barrier before each sample, the maximum over ranks after), which is what a step waits for.
The last timed window's reduction is kept bucket by bucket as rank 0 saw it
(``DataParallel.last``: each bucket's bytes, start and seconds).
"""

from __future__ import annotations

import itertools
import json
import os
import sys
import time
from typing import Any

import numpy as np


def _timed(comm: Any, fn: Any, repeats: int) -> list[float]:
    fn()  # warm up: first-touch pages, MPI connection set-up
    samples = []
    for _ in range(repeats):
        comm.comm.Barrier()
        start = time.perf_counter()
        fn()
        slowest = np.array([time.perf_counter() - start])
        comm.comm.Allreduce(comm.MPI.IN_PLACE, slowest, op=comm.MPI.MAX)
        samples.append(float(slowest[0]))
    return samples


def arena_reduction(comm: Any, elements: int, repeats: int) -> dict[str, Any]:
    arena = np.ones(elements, dtype=np.float32)
    other = np.empty_like(arena)
    copy = _timed(comm, lambda: np.copyto(other, arena), repeats)
    reduce = _timed(comm, lambda: comm.allreduce(arena), repeats)
    return {"elements": elements, "bytes": arena.nbytes, "copy_seconds": copy, "allreduce_seconds": reduce}


def step_time(comm: Any, settings: dict[str, Any], k: int, overlap: bool = False) -> tuple[list[float], Any]:
    """Seconds per optimizer step of an MLP with k micro-batches per rank (one window each step), and
    the last window's reduction (``WindowReduction.as_dict()``; None on one rank)."""
    import minitorch_accum as mta
    from minitorch_accum import nn, optim
    from minitorch_accum.accum import Accumulator
    from minitorch_accum.distributed import DataParallel
    from minitorch_accum.nn import functional as F

    dims, b = settings["dims"], settings["micro_batch"]
    rng = np.random.default_rng(0)
    layers: list[nn.Module] = []
    for i, (d_in, d_out) in enumerate(itertools.pairwise(dims)):
        layers.append(nn.Linear(d_in, d_out, rng=rng))
        if i < len(dims) - 2:
            layers.append(nn.ReLU())
    model = nn.Sequential(*layers)
    # overlap needs more than one bucket to start anything early: 1 MiB buckets then
    reducer = (DataParallel(comm, bucket_bytes=1 << 20, first_bucket_bytes=1 << 18, overlap=overlap)
               if comm.world_size > 1 else None)
    acc = Accumulator(model, steps=k, reducer=reducer)
    opt = optim.AdamW(lr=1e-3)
    data = rng.normal(size=(k, b, dims[0])).astype(np.float32)
    labels = rng.integers(0, dims[-1], size=(k, b))

    def window() -> None:
        for i in range(k):
            acc.backward(F.cross_entropy(model(mta.tensor(data[i])), labels[i], reduction="sum"), num_items=b)
        opt.step(model, acc)
        acc.zero()

    samples = _timed(comm, window, settings["windows"])
    return samples, None if reducer is None else reducer.last.as_dict()


def main(argv: list[str]) -> None:
    from minitorch_accum.distributed import MPICommunicator

    with open(argv[0]) as handle:
        settings = json.load(handle)
    comm = MPICommunicator()
    result: dict[str, Any] = {"ranks": comm.world_size, "threads_per_rank": int(os.environ["MTA_NUM_THREADS"])}
    if comm.world_size > 1:
        result["arenas"] = [arena_reduction(comm, n, settings["repeats"]) for n in settings["arena_elements"]]
    # one global batch: k micro-batches per rank at R ranks, R x k in one process
    result["k"] = settings["k"] * settings["ranks"] // comm.world_size
    result["step_seconds"], result["window_reduction"] = step_time(comm, settings, result["k"])
    if comm.world_size > 1:
        result["overlap_step_seconds"], result["overlap_window_reduction"] = step_time(
            comm, settings, result["k"], overlap=True)
    if comm.rank == 0:
        with open(argv[1], "w") as handle:
            json.dump(result, handle)


if __name__ == "__main__":
    main(sys.argv[1:])
