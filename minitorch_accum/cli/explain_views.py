"""What ``maccum explain --trace-out w.json --figure w.png`` writes: the window in the viewers.

The window is recorded once more, as training runs it (forward and backward of each
micro-batch, captured and replayed unless ``--no-replay``, the close, an AdamW step reading the
arena), and beside it one batch holding the same items (k x b beside 1 x kb): from the same seed,
so the model, the items and the gradients are those explain printed. Three files come of the two recordings:

- ``w.json``: the Trace Event Format trace of both (ui.perfetto.dev; one file per rank under
  mpiexec, ``w.rank1.json``, which Holistic Trace Analysis reads as a directory);
- ``w.snapshot.pickle``: their array allocations as a PyTorch memory snapshot
  (pytorch.org/memory_viz: the k small peaks of the window, then the one big peak);
- ``w.png``: the timeline of both side by side (``cli/window_figure.py``), on rank 0.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from minitorch_accum.accum import Accumulator
from minitorch_accum.autodiff import tensor
from minitorch_accum.backend import manual_seed
from minitorch_accum.cli.tasks import load_task
from minitorch_accum.cli.training_run import make_optimizer
from minitorch_accum.data import DataLoader
from minitorch_accum.distributed import Communicator, DataParallel, rank_windows
from minitorch_accum.durable_files import check_output_path
from minitorch_accum.nn import functional as F
from minitorch_accum.observe import AccumulationTrace
from minitorch_accum.observe.chrome_trace import rank_trace_path, write_chrome_trace
from minitorch_accum.observe.memory_snapshot import memory_snapshot, save_memory_snapshot

__all__ = ["check_view_paths", "record_window", "snapshot_path", "wanted", "write_window_views"]


def wanted(values: Mapping[str, Any]) -> bool:
    """Whether the explain command was asked for a trace or a figure."""
    return values.get("trace_out") is not None or values.get("figure") is not None


def check_view_paths(values: Mapping[str, Any], comm: Communicator) -> None:
    """Refuse now (UnwritableOutputError) a trace or snapshot file of this rank that could not be
    written once its window is recorded: ``w.rank1.json`` and ``w.rank1.snapshot.pickle`` may be
    directories or read-only files even where the ``w.json`` given was checked."""
    if values.get("trace_out") is None:
        return
    trace_file = rank_trace_path(values["trace_out"], comm.rank, comm.world_size)
    check_output_path(trace_file, "--trace-out")
    check_output_path(snapshot_path(trace_file), "the memory snapshot beside --trace-out")


def snapshot_path(trace_out: str | os.PathLike) -> Path:
    """``w.snapshot.pickle`` beside ``w.json`` (``w.rank1.snapshot.pickle`` beside ``w.rank1.json``)."""
    target = Path(trace_out)
    return target.with_name(f"{target.name.removesuffix(target.suffix)}.snapshot.pickle")


def _micro_batch(step: Any, acc: Accumulator, batch: Any, dtype: str) -> None:
    # its own function, so the micro-batch's arrays are freed (and recorded freed) when it returns
    x, y = batch
    with acc.micro_batch():
        acc.backward(step(tensor(x, dtype=dtype) if x.dtype.kind == "f" else x, y), num_items=F.count_items(y))


def record_window(values: Mapping[str, Any], k: int, micro_batch: int, comm: Communicator,
                  label: str) -> AccumulationTrace:
    """One window of ``k`` micro-batches of ``micro_batch`` rows and its optimizer step, traced
    with every array allocation (``memory="frames"``), from the seed of ``values``."""
    dtype, reduction = values["dtype"], values["reduction"]
    manual_seed(values["seed"])
    task = load_task(values["dataset"], dtype=dtype, block_size=values["block_size"])
    model = task.model
    loader = DataLoader(task.train, micro_batch, shuffle=True, seed=values["seed"])
    window = rank_windows(len(loader), k, comm.world_size, comm.rank)[0]
    trace = AccumulationTrace(memory="frames", name=label, rank=comm.rank, world_size=comm.world_size)
    acc = Accumulator(model, steps=k, reduction=reduction, fusion=values["fusion"],
                      accum_dtype="float64" if dtype == "float64" else "float32", trace=trace,
                      reducer=DataParallel(comm) if comm.world_size > 1 else None)
    optimizer = make_optimizer(values["optimizer"], values["lr"])
    loss_reduction = "mean" if reduction == "mean" else "sum"
    # each forward captured and replayed as training does (the trace's spans say how each ran)
    step = acc.capture(lambda x, y: F.cross_entropy(model(x), y, reduction=loss_reduction),
                       enabled=values.get("replay", True))
    with trace.recording_memory():
        for index in window.batches:
            _micro_batch(step, acc, loader.batch(0, index), dtype)
        acc.window_scale()  # the close (with several ranks, the reduction) before the step reads it
        with trace.span("optimizer step", "window", optimizer=type(optimizer).__name__):
            optimizer.step(model, acc)
        acc.zero()
    return trace


def write_window_views(values: Mapping[str, Any], comm: Communicator) -> list[str]:
    """Record k x b and 1 x kb and write what ``values`` asks for; returns one line per file."""
    k, b = values["grads_accumulation"], values["micro_batch"]
    traces = [record_window(values, k, b, comm, f"{k} x {b}"),
              record_window(values, 1, k * b, comm, f"1 x {k * b}")]
    lines = []
    if values.get("trace_out") is not None:
        # rank 0's start is time zero of every rank's file
        base = float(comm.allreduce_scalars([traces[0].wall_origin if comm.rank == 0 else 0.0], np.float64)[0])
        trace_file = write_chrome_trace(traces, rank_trace_path(values["trace_out"], comm.rank, comm.world_size),
                                        base=base)
        snapshot = memory_snapshot([t.memory for t in traces if t.memory is not None],
                                   labels=[t.name for t in traces], wall_origins=[t.wall_origin for t in traces])
        snapshot_file = save_memory_snapshot(snapshot, snapshot_path(trace_file))
        ranks = f" (one per rank: {comm.world_size} files)" if comm.world_size > 1 else ""
        lines.append(f"wrote {trace_file}{ranks}: the trace of {traces[0].name} and of {traces[1].name}, each with "
                     "its AdamW step; open it in ui.perfetto.dev")
        lines.append(f"wrote {snapshot_file}: their array allocations as a PyTorch memory snapshot; drag it "
                     "into pytorch.org/memory_viz")
    if values.get("figure") is not None and comm.rank == 0:
        from minitorch_accum.cli.window_figure import save_window_figure  # matplotlib only when asked

        lines.append(f"wrote {save_window_figure(traces, values['figure'])}: the timeline of {traces[0].name} "
                     f"beside {traces[1].name}")
    return lines
