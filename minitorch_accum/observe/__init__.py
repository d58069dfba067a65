"""Observation of accumulation, apart from it: memory measured by the allocator, the kernel
trace and its views (the Trace Event Format, PyTorch's memory snapshot), and the precision
study. The accumulator asks for them (``Accumulator(trace=True)``, ``acc.micro_batch()``);
they watch its store through wrappers of its leaf sink (``watched_writes.py``) and the passes
it announces, and read the accumulator without importing it."""

from minitorch_accum.observe.chrome_trace import chrome_trace, rank_trace_path, write_chrome_trace
from minitorch_accum.observe.memory import ArrayAllocationWatch, MemoryReport, PeakMemory, array_tracking_available
from minitorch_accum.observe.memory_snapshot import memory_snapshot, save_memory_snapshot
from minitorch_accum.observe.trace import AccumulationTrace
from minitorch_accum.observe.trace_events import KernelEvent, Span

__all__ = [
    "AccumulationTrace",
    "ArrayAllocationWatch",
    "KernelEvent",
    "MemoryReport",
    "PeakMemory",
    "Span",
    "array_tracking_available",
    "chrome_trace",
    "memory_snapshot",
    "rank_trace_path",
    "save_memory_snapshot",
    "write_chrome_trace",
]
