"""What the Accumulator asks of the place a window's gradients land.

Two stores implement it: ``ArenaStore`` (persistent flat buffers written by fused
kernels, the library's subject) and ``ContainerStore`` (Burn's summed Gradients
containers, kept for comparison). The Accumulator holds the window (counts, items,
normalization, loss scale) and talks to its store only through these methods.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

import numpy as np

from minitorch_accum.autodiff import LeafSink, Tensor
from minitorch_accum.kernels.arrays import Array  # a NumPy or a CuPy array: Any to mypy (CuPy has no types)
from minitorch_accum.nn import Param

__all__ = ["ForeignParameterError", "GradientStore", "StoreRecorder", "check_touched", "split_state_key"]


class StoreRecorder(Protocol):
    """Who hears of the kernels a store's passes run (the Accumulator's tracer, observe/): the
    store names each pass and what it covers, the recorder times it. A reducer's collectives,
    timed by the reducer, are told with a call."""

    def __call__(self, param: str, kernel: str, elements: int, nbytes: int, seconds: float, *,
                 materialized: bool, window_pass: bool, started: float | None = None) -> None:
        """One kernel that ran, ``seconds`` long."""

    def timed(self, work: Sequence[tuple[str, str, Array]], *, window_pass: bool) -> AbstractContextManager[None]:
        """The block runs ``work`` ((parameter name, kernel, array) each) as one pass."""


class GradientStore(Protocol):
    """A window's raw gradient sums, by parameter."""

    #: True after a micro-batch failed halfway: the sums are no longer sums of whole micro-batches
    poisoned: bool
    #: told of every pass over the window's gradients (None: not tracing); a store's writes in a
    #: micro-batch are watched by wrapping its sink instead (the ``sink`` of ``micro_batch``)
    recorder: StoreRecorder | None

    @property
    def nbytes(self) -> int:
        """Bytes kept for the window's gradients."""

    def micro_batch(self, loss: Tensor, seed: Array | None, scale: float, sink: LeafSink | None = None) -> None:
        """Backpropagate one micro-batch and add its gradients, each times ``scale``. ``sink``:
        what the engine hands each leaf gradient instead of the store itself, a wrapper of it
        that watches its writes (observe/watched_writes.py); only a store that is a leaf sink
        takes one."""

    def close(self) -> None:
        """The window's last micro-batch is in: settle what must be settled once."""

    def views(self) -> list[tuple[Param, Array]]:
        """(param, summed gradient array) for every parameter with a gradient, in model order."""

    def finite_check(self) -> bool:
        """True when every summed gradient is finite."""

    def scale_in_place(self, factor: float) -> None:
        """Multiply every summed gradient by ``factor``."""

    def norm(self) -> float:
        """Global L2 norm of the sums as they are."""

    def reset(self) -> None:
        """Empty the store for a new window."""

    def state_meta(self) -> dict[str, Any]:
        """Small facts needed to resume mid-window (JSON-serializable)."""

    def state_arrays(self) -> dict[str, np.ndarray]:
        """The sums as host arrays, for a checkpoint."""

    def load(self, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
        """Restore ``state_meta()`` and ``state_arrays()`` output."""


class ForeignParameterError(ValueError):
    """A loss reached a parameter that is not part of the accumulator's model."""

    def __init__(self, shape: tuple[int, ...], window_intact: bool) -> None:
        after = ("the window is unchanged" if window_intact else
                 "the window may hold part of this micro-batch: call acc.zero() to discard it")
        super().__init__(
            f"backward: the loss depends on a parameter of shape {shape} that is not part of this "
            f"accumulator's model (a loss from another model, or two models in one window); {after}"
        )


def check_touched(touched: bool) -> None:
    """ValueError when a micro-batch's loss reached no parameter of the model at all."""
    if not touched:
        raise ValueError("backward: the loss does not depend on any parameter of this accumulator's model")


def split_state_key(key: str, roles: Iterable[str]) -> tuple[str, str]:
    """``"arena/float32"`` -> ("arena", "float32"); ValueError for a key of no known role."""
    role, sep, rest = key.partition("/")
    if not sep or role not in roles or not rest:
        raise ValueError(f"accumulator state holds an unexpected array {key!r}")
    return role, rest
