"""What an optimizer reads gradients from: a Gradients container, or an accumulation window.

The accumulation layer sits above optim, so optim cannot import it; instead an
accumulator offers ``gradient_window()``, returning the raw sums in its persistent
buffers plus the one factor (1/k or 1/N_items, times any loss-scale unscale and
clipping) that turns them into the window's gradient. The optimizer folds that
factor into its fused step, so normalization costs no pass over memory.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol

from minitorch_accum.autodiff import Gradients, Tensor
from minitorch_accum.kernels.arrays import Array

__all__ = ["GradientWindow", "StepRecorder", "WindowSource", "gradient_window"]


class StepRecorder(Protocol):
    """Who hears of a fused step's launches (an Accumulator's tracer, observe/): the optimizer names
    each launch's kernel, the (parameter name, gradient array) pairs it reads and the scale it
    folds in; the recorder times the block, one launch."""

    def launch(self, kernel: str, work: Sequence[tuple[str, Any]], *,
               scale: float) -> AbstractContextManager[None]: ...


@dataclass
class GradientWindow:
    """Gradient arrays by parameter, to be multiplied by ``grad_scale`` before use.

    ``skip`` is set when the window saw a non-finite gradient: the step must not run.
    ``recorder`` hears the step's launches when the window is traced (None: nothing listens).
    """

    arrays: dict[int, Array] = field(default_factory=dict)
    grad_scale: float = 1.0
    skip: bool = False
    recorder: StepRecorder | None = None

    def get(self, param: Tensor) -> Array | None:
        """The gradient array of ``param``, or None when the window has none."""
        return self.arrays.get(id(param))


class WindowSource(Protocol):
    """What an accumulator offers the optimizer in place of a Gradients container."""

    def gradient_window(self) -> GradientWindow: ...


def gradient_window(grads: Gradients | WindowSource) -> GradientWindow:
    """A GradientWindow for a Gradients container or any object offering ``gradient_window()``."""
    if isinstance(grads, Gradients):
        return GradientWindow({id(t): g for t, g in grads.items()})
    offer = getattr(grads, "gradient_window", None)
    if callable(offer):
        window = offer()
        if not isinstance(window, GradientWindow):
            raise TypeError(f"{type(grads).__name__}.gradient_window() must return a GradientWindow")
        return window
    raise TypeError(
        f"optimizer step expects a Gradients container or an Accumulator, got {type(grads).__name__}"
    )
