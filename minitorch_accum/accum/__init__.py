"""Accumulation: the persistent gradient arena, the Accumulator and its window, the two stores,
normalization, loss scaling and the data-parallel reducer's hook. Observing it (memory, the
kernel trace, the precision study) is ``minitorch_accum.observe``'s."""

from minitorch_accum.accum.accumulator import FUSIONS, Accumulator
from minitorch_accum.accum.arena import ARENA_DTYPES, GradArena
from minitorch_accum.accum.arena_store import ROUNDINGS, ArenaStore
from minitorch_accum.accum.container_store import ContainerStore, GradientsAccumulator
from minitorch_accum.accum.gradient_store import ForeignParameterError, GradientStore
from minitorch_accum.accum.loss_check import MeanLossError
from minitorch_accum.accum.loss_scaler import DynamicLossScaler, ScaleEvent
from minitorch_accum.accum.normalization import REDUCTIONS, WINDOW_REDUCTIONS, window_scale
from minitorch_accum.accum.window import Window

__all__ = [
    "ARENA_DTYPES",
    "FUSIONS",
    "REDUCTIONS",
    "ROUNDINGS",
    "WINDOW_REDUCTIONS",
    "Accumulator",
    "ArenaStore",
    "ContainerStore",
    "DynamicLossScaler",
    "ForeignParameterError",
    "GradArena",
    "GradientStore",
    "GradientsAccumulator",
    "MeanLossError",
    "ScaleEvent",
    "Window",
    "window_scale",
]
