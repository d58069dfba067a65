"""A recipe: how a training loop turns micro-batches into windows and windows into optimizer steps.

``Recipe`` is the library's way, written as a handful of hooks over the engine (the
Accumulator, the optimizers, ``clip_grad_norm``, ``DataParallel``); the equivalence
properties run a recipe against an independent reference (plain backward over the big
batch, no accumulator) on the user's model. A faulty recipe, as the bug museum holds,
overrides one hook and changes nothing in the library:

    class ScheduledPerMicroBatch(Recipe):
        def after_micro_batch(self, optimizer, model, scheduler, last):
            if not last and scheduler is not None:
                scheduler.step()          # the schedule advances k times per window

The hooks, in the order a window calls them: ``accumulator`` (the gradient store),
``items`` (the item count passed with each micro-batch), ``backward`` (one micro-batch
into the window), ``after_micro_batch`` (between micro-batches), ``clip``, ``step`` and
``end_window``; ``window`` runs the micro-batch hooks over a window's rows, ``window_sizes``
cuts an epoch into windows, ``rank_gradients`` combines the ranks of a data-parallel window.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from minitorch_accum.accum import Accumulator
from minitorch_accum.accum.normalization import micro_batch_loss_reduction
from minitorch_accum.autodiff import Gradients, Tensor
from minitorch_accum.distributed import DataParallel
from minitorch_accum.nn import Module
from minitorch_accum.optim import Optimizer, clip_grad_norm
from minitorch_accum.optim.lr_scheduler import LRScheduler
from minitorch_accum.testing.simulated_ranks import ThreadCommunicator, run_ranks
from minitorch_accum.testing.subject import Rows, Subject

__all__ = ["Recipe", "arena_dtype", "gradient_arrays"]

#: where a window's gradients are: the Accumulator, or a Gradients container a recipe summed itself
GradientSource = Accumulator | Gradients


def arena_dtype(subject: Subject) -> str:
    """The gradient arena's dtype for the subject's: float64 for float64 models, float32 otherwise."""
    return "float64" if subject.dtype == "float64" else "float32"


def gradient_arrays(source: GradientSource, model: Module) -> dict[str, np.ndarray]:
    """The window's normalized gradient by parameter name, float64 (zeros where none arrived)."""
    grads = source.grads() if isinstance(source, Accumulator) else source
    return {name: np.asarray(grads[p], dtype=np.float64) if p in grads else np.zeros(p.shape)
            for name, p in model.named_parameters()}


class Recipe:
    """The correct recipe: summed micro-batch losses into the arena, one normalization by the
    window's items, clipping by the window's norm, one optimizer and scheduler step per window."""

    name = "correct"
    summary = ("summed micro-batch losses accumulated in the arena, normalized once by the window's items; "
               "clip, step and schedule once per window")
    #: the Accumulator's reduction when it is not the one the recipe means (``reduction``, what the
    #: properties compare with); None: the same
    accumulates_with: str | None = None

    def __init__(self, reduction: str = "items", fusion: str = "gemm") -> None:
        self.reduction = reduction
        self.fusion = fusion

    @property
    def window_reduction(self) -> str:
        """The reduction the Accumulator is given."""
        return self.accumulates_with or self.reduction

    # ------------------------------------------------------------------ one window
    def accumulator(self, subject: Subject, model: Module, steps: int, **options: Any) -> Accumulator:
        """The window's gradient store (``options``: a loss scaler, a data-parallel reducer)."""
        return Accumulator(model, steps=steps, reduction=self.window_reduction, fusion=self.fusion,
                           accum_dtype=arena_dtype(subject), **options)

    def items(self, subject: Subject, rows: Rows, counted: int) -> int:
        """The item count passed with a micro-batch: what ``loss_fn`` counted."""
        return counted

    def backward(self, acc: Accumulator, loss: Tensor, items: int) -> None:
        """One micro-batch into the window: its summed loss (a mean for the mean reductions)."""
        if micro_batch_loss_reduction(self.window_reduction) == "mean":
            loss = loss * (1.0 / max(items, 1))
        acc.backward(loss, num_items=items)

    def window(self, subject: Subject, model: Module, parts: Sequence[Rows], steps: int,
               acc: Accumulator | None = None, max_norm: float | None = None,
               after: Callable[[bool], None] | None = None, **options: Any) -> GradientSource:
        """Accumulate ``parts`` (rows of the batch, one micro-batch each) into a window of k = ``steps``
        (partial when it holds fewer). ``max_norm``: the clipping the step will apply (``clip`` does it,
        after the window); ``after(last)`` is called after each micro-batch."""
        acc = acc if acc is not None else self.accumulator(subject, model, steps, **options)
        for index, rows in enumerate(parts):
            loss, counted = subject.loss(model, rows)
            self.backward(acc, loss, self.items(subject, rows, counted))
            if after is not None:
                after(index == len(parts) - 1)
        return acc

    # -------------------------------------------------------------- optimizer steps
    def window_sizes(self, micro_batches: int, k: int) -> list[int]:
        """How an epoch of ``micro_batches`` is cut into windows: k each, the last one partial."""
        return [min(k, micro_batches - start) for start in range(0, micro_batches, k)]

    def after_micro_batch(self, optimizer: Optimizer, model: Module, scheduler: LRScheduler | None,
                          last: bool) -> None:
        """Between the micro-batches of a window (``last``: the window's last one): nothing here."""

    def clip(self, source: GradientSource, max_norm: float) -> None:
        """Clip the window's gradient by its global norm (folded into the window's scale)."""
        clip_grad_norm(source, max_norm)

    def step(self, optimizer: Optimizer, model: Module, source: GradientSource, lr: float | None) -> None:
        optimizer.step(model, source, lr=lr)

    def end_window(self, source: GradientSource) -> None:
        if isinstance(source, Accumulator):
            source.zero()

    def train(self, subject: Subject, model: Module, optimizer: Optimizer, scheduler: LRScheduler | None,
              epoch: Sequence[Rows], k: int, epochs: int, max_norm: float | None = None) -> None:
        """``epochs`` passes over ``epoch`` (the micro-batches' rows), one optimizer step per window."""
        acc = self.accumulator(subject, model, k)
        for _ in range(epochs):
            start = 0
            for size in self.window_sizes(len(epoch), k):
                parts = epoch[start:start + size]
                start += size
                source = self.window(subject, model, parts, k, acc=acc, max_norm=max_norm,
                                     after=lambda last: self.after_micro_batch(optimizer, model, scheduler, last))
                lr = scheduler.step() if scheduler is not None else None
                if max_norm is not None:
                    self.clip(source, max_norm)
                self.step(optimizer, model, source, lr)
                self.end_window(source)

    # ---------------------------------------------------------------- data parallel
    def rank_gradients(self, subject: Subject, models: Sequence[Module], shares: Sequence[Sequence[Rows]],
                       k: int) -> list[dict[str, np.ndarray]]:
        """Each rank's view of the window's gradient, rank r accumulating ``shares[r]`` into its model
        ``models[r]``: every rank's arena summed over the ranks once (``DataParallel``, one thread per
        rank), normalized by the items of every rank. A recipe whose ``window`` sums its own container
        instead gets that container averaged over the ranks, as DDP averages ``.grad``."""

        def rank(comm: ThreadCommunicator) -> tuple[dict[str, np.ndarray], bool]:
            model = models[comm.rank]
            acc = self.accumulator(subject, model, k, reducer=DataParallel(comm))
            source = self.window(subject, model, shares[comm.rank], k, acc=acc)
            return gradient_arrays(source, model), source is acc

        per_rank = run_ranks(len(models), rank)
        if all(reduced for _, reduced in per_rank):
            return [grads for grads, _ in per_rank]
        mean = {name: sum(grads[name] for grads, _ in per_rank) / len(per_rank) for name in per_rank[0][0]}
        return [dict(mean) for _ in per_rank]

    def __repr__(self) -> str:
        return f"{type(self).__name__}(reduction={self.reduction!r}, fusion={self.fusion!r})"
