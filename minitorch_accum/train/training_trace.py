"""The trace of a training run (``LearnerBuilder.trace(path)``, ``maccum train --trace-out``).

Opened when ``fit`` starts and written when it ends, after ``final.safetensors`` (so a trace that
cannot be written never costs the trained parameters), or when it is interrupted: the
Accumulator's windows, micro-batches and kernels, the Learner's forward passes and optimizer
steps, the arena's bytes and the array bytes alive as counter tracks. Under mpiexec each rank
writes its own file (``run.trace.rank1.json``), on a time base the ranks agree on at the start,
with ``distributedInfo`` for Holistic Trace Analysis.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from minitorch_accum.accum import Accumulator
from minitorch_accum.distributed import Communicator
from minitorch_accum.distributed.rank_agreement import stop_if_any_rank_failed
from minitorch_accum.durable_files import check_output_path
from minitorch_accum.observe import AccumulationTrace
from minitorch_accum.observe.chrome_trace import rank_trace_path, write_chrome_trace

__all__ = ["TraceWriteError", "TrainingTrace", "trace_file_name"]


class TraceWriteError(RuntimeError):
    """The trace of a finished run could not be written; the message says what was kept."""


def trace_file_name(name: str, value: Any) -> Path | None:
    """The check of the ``trace_out`` setting: None, or a path ending in ``.json`` (the name
    Perfetto, chrome://tracing and Holistic Trace Analysis all read)."""
    if value is None:
        return None
    if not isinstance(value, str | os.PathLike) or not str(value).strip():
        raise ValueError(f"{name} must be a file name ending in .json, got {value!r}")
    path = Path(value)
    if path.suffix != ".json":
        raise ValueError(f"{name} must end in .json (the Trace Event Format file Perfetto and HTA read), "
                         f"got {str(value)!r}")
    return path


class TrainingTrace:
    """A context manager around ``fit``'s loop: attaches a trace to the accumulator while open;
    ``write()`` then writes it (this rank's file); ``written`` is the path."""

    def __init__(self, path: str | os.PathLike, accumulator: Accumulator, comm: Communicator) -> None:
        self.accumulator = accumulator
        self.trace = AccumulationTrace(memory="counter", rank=comm.rank, world_size=comm.world_size)
        self.path = rank_trace_path(path, comm.rank, comm.world_size)
        # rank 0's origin is every rank's time zero, so the ranks' files line up
        self.base = float(comm.allreduce_scalars([self.trace.wall_origin if comm.rank == 0 else 0.0],
                                                 np.float64)[0])
        self.written: Path | None = None
        self._previous: AccumulationTrace | None = None

    @staticmethod
    def check_path(path: str | os.PathLike | None, comm: Communicator) -> None:
        """Refuse, when ``fit`` starts, a trace some rank could not write when it ends: each rank checks
        its own file (``durable_files.check_output_path``: the directory exists and takes new files).
        Every rank takes part, with a path or without; a refusal is raised on every rank (one process:
        UnwritableOutputError; data-parallel: RankStartError, the lowest failing rank's message)."""
        failure: OSError | None = None
        if path is not None:
            try:
                check_output_path(rank_trace_path(path, comm.rank, comm.world_size), "trace_out")
            except OSError as error:
                failure = error
        stop_if_any_rank_failed(comm, failure)

    def __enter__(self) -> TrainingTrace:
        self._previous = self.accumulator.trace
        self.accumulator.trace = self.trace
        assert self.trace.memory is not None
        self.trace.memory.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self.trace.memory is not None
        self.trace.memory.__exit__(*exc)
        self.accumulator.trace = self._previous

    def write(self) -> Path:
        """Write the trace recorded while open; OSError as it comes."""
        self.written = write_chrome_trace([self.trace], self.path, base=self.base)
        return self.written
