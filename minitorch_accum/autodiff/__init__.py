"""Autodiff: tensors, the graph they build, backward, and the Gradients container."""

from minitorch_accum.autodiff import creation, functional, sampling
from minitorch_accum.autodiff.creation import *  # noqa: F403  (their __all__ is this package's too)
from minitorch_accum.autodiff.engine import GraphFreedError, LeafSink, run_backward
from minitorch_accum.autodiff.functional import *  # noqa: F403
from minitorch_accum.autodiff.grad_mode import enable_grad, is_grad_enabled, no_grad
from minitorch_accum.autodiff.gradients import Gradients
from minitorch_accum.autodiff.graph import apply
from minitorch_accum.autodiff.reductions import ValuesIndices
from minitorch_accum.autodiff.replay import REPLAY_OUTCOMES, Replay, ReplayReport, capture
from minitorch_accum.autodiff.sampling import *  # noqa: F403
from minitorch_accum.autodiff.saved_versions import InPlaceModificationError, detect_raw_writes
from minitorch_accum.autodiff.tensor import ElementCount, Tensor, matmul

__all__ = [
    *creation.__all__,
    *functional.__all__,
    *sampling.__all__,
    "ElementCount",
    "Gradients",
    "GraphFreedError",
    "InPlaceModificationError",
    "LeafSink",
    "REPLAY_OUTCOMES",
    "Replay",
    "ReplayReport",
    "Tensor",
    "ValuesIndices",
    "apply",
    "capture",
    "detect_raw_writes",
    "enable_grad",
    "is_grad_enabled",
    "matmul",
    "no_grad",
    "run_backward",
]
