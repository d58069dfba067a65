"""Accumulation: the persistent gradient arena, the Accumulator, normalization rules,
loss scaling, memory accounting and the kernel trace."""

from minitorch_accum.accum.accumulator import FUSIONS, Accumulator
from minitorch_accum.accum.arena import GradArena
from minitorch_accum.accum.arena_store import ArenaStore
from minitorch_accum.accum.container_store import ContainerStore, GradientsAccumulator
from minitorch_accum.accum.gradient_store import ForeignParameterError, GradientStore
from minitorch_accum.accum.loss_check import MeanLossError
from minitorch_accum.accum.loss_scaler import DynamicLossScaler, ScaleEvent
from minitorch_accum.accum.memory import MemoryReport, PeakMemory
from minitorch_accum.accum.normalization import REDUCTIONS, WINDOW_REDUCTIONS, window_scale
from minitorch_accum.accum.trace import AccumulationTrace, KernelEvent

__all__ = [
    "FUSIONS",
    "REDUCTIONS",
    "WINDOW_REDUCTIONS",
    "AccumulationTrace",
    "Accumulator",
    "ArenaStore",
    "ContainerStore",
    "DynamicLossScaler",
    "ForeignParameterError",
    "GradArena",
    "GradientStore",
    "GradientsAccumulator",
    "KernelEvent",
    "MeanLossError",
    "MemoryReport",
    "PeakMemory",
    "ScaleEvent",
    "window_scale",
]
