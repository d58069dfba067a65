"""What a trace holds, apart from the trace itself: a kernel's event, a span, the lanes they
go on, which implementation ran a kernel, and what hears each kernel as it runs. The trace
(``trace.py``) records them; its views (``chrome_trace.py``) and the recorders
(``window_tracer.py``, ``watched_writes.py``) read them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from minitorch_accum.kernels import kernel_path
from minitorch_accum.kernels.catalog import ADAM, CATALOG, SGD

__all__ = ["COLLECTIVES", "LANES", "OPTIMIZER_STEPS", "KernelEvent", "KernelRecorder", "Span", "kernel_path_of"]

#: the lanes of a trace (one thread track each in the Chrome trace), in display order
LANES = ("window", "micro-batches", "arena writes", "collectives")
#: kernel names that are a reduction over the ranks, not a write of this rank's arena
COLLECTIVES = ("allreduce", "reduce_scatter")
#: the fused optimizer steps: they read the window's sums and fold its scale in (the window's lane)
OPTIMIZER_STEPS = tuple(row.name for row in CATALOG if row.family in (SGD, ADAM))
#: passes that NumPy (or CuPy) itself runs, not one of the library's kernels
_ARRAY_LIBRARY_PASSES = ("scale", "container-store", "container-add", "gemm-fallback")


@dataclass(frozen=True)
class KernelEvent:
    """One write of a gradient contribution into the arena, or one window-level pass (the fused
    optimizer step's among them, with the ``scale`` it folded into the gradients it read)."""

    window: int
    micro_batch: int  # 0-based within the window; -1 for window-level passes
    param: str
    kernel: str
    elements: int
    bytes: int
    seconds: float
    materialized: bool  # True when the contribution existed as its own array before being added
    start: float = 0.0  # seconds from the trace's origin
    path: str = ""  # what ran it: native, emulated, reference, cupy; blas, cublas; numpy; mpi, nccl
    scale: float | None = None  # an optimizer step's: the factor it multiplied the window's sums by

    @property
    def gb_per_s(self) -> float:
        return self.bytes / self.seconds / 1e9 if self.seconds > 0 else 0.0


@dataclass(frozen=True)
class Span:
    """A stretch of time on one lane: a micro-batch's forward or backward, the window's close, the step."""

    name: str
    lane: str
    start: float  # seconds from the trace's origin
    seconds: float
    args: dict[str, Any] = field(default_factory=dict)


class KernelRecorder(Protocol):
    """What hears every kernel that wrote or read the window's gradients (a store's writes seen
    through ``watched_writes.py``, a reducer's collectives); the Accumulator's tracer adds the
    window and micro-batch numbers, the time and the path. ``started`` (perf_counter seconds)
    when the caller knows it, else it ended just now."""

    def __call__(self, param: str, kernel: str, elements: int, nbytes: int, seconds: float, *,
                 materialized: bool, window_pass: bool, started: float | None = None) -> None: ...


def kernel_path_of(kernel: str, device_kind: str = "cpu", communicator: str = "") -> str:
    """Which implementation ran ``kernel`` just now: the library's kernels on the CPU path of
    ``MTA_KERNELS`` (native, emulated, reference) or CuPy's CUDA kernels; a GEMM-fused write on
    BLAS or cuBLAS; NumPy's own arithmetic; a collective on its communicator (mpi, nccl, local)."""
    gpu = device_kind == "cuda"
    if kernel in COLLECTIVES:
        return communicator or "collective"
    if kernel.startswith("gemm-beta"):
        return "cublas" if gpu else "blas"
    if kernel in _ARRAY_LIBRARY_PASSES:
        return "cupy" if gpu else "numpy"
    return "cupy" if gpu else kernel_path()
