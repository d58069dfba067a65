"""Faulty recipes: real accumulation bugs of public systems, each one hook of ``Recipe`` overridden.

None of them patches the library: they drive the same engine (Accumulator, optimizers,
``clip_grad_norm``, Gradients containers) the way the buggy system did; where the system's loop is
the bug (Lightning's and Burn's epoch loops), ``train`` is that loop transliterated, its decisions
commented with the names they have there. ``bugs.py`` pairs each with its source, a small model,
and the property that catches it; a bug that lived in the loss (Hugging Face's count before the
shift) is a faulty ``loss_fn`` there, not a recipe.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from minitorch_accum.accum import Accumulator
from minitorch_accum.autodiff import Gradients, Tensor, no_grad
from minitorch_accum.nn import Module
from minitorch_accum.optim import Optimizer, clip_grad_norm
from minitorch_accum.optim.lr_scheduler import LRScheduler
from minitorch_accum.testing.recipes import GradientSource, Recipe, gradient_arrays
from minitorch_accum.testing.subject import Rows, Subject

__all__ = ["AdamCountsMicroBatches", "BurnDropsThePartialWindow", "ClipsEachMicroBatch", "Float32Accumulator",
           "LightningStepsOnTheEpochsLastBatch", "MeanOfMicroBatchMeans", "NominalKOnPartialWindows",
           "NormalizedPerRank", "ResetAtEveryBackward", "ScheduledPerMicroBatch", "SummedWithoutDividing"]


def _window_items(subject: Subject, model: Module, parts: Sequence[Rows]) -> int:
    """The window's items, counted before its backward passes (one forward per part, no graph)."""
    with no_grad():
        return sum(subject.loss(model, rows)[1] for rows in parts)


class MeanOfMicroBatchMeans(Recipe):
    name = "mean_of_means"
    summary = ("each micro-batch's loss is a mean over its own tokens, and the window averages those means "
               "(reduction='mean'): a token of a short micro-batch weighs more than one of a long micro-batch")
    accumulates_with = "mean"


class NormalizedPerRank(Recipe):
    name = "per_rank_normalization"
    summary = ("each rank normalizes its share of the window by its own item count, and the ranks' gradients "
               "are then averaged: a rank holding few tokens weighs as much as one holding many")

    def rank_gradients(self, subject: Subject, models: Sequence[Module], shares: Sequence[Sequence[Rows]],
                       k: int) -> list[dict[str, np.ndarray]]:
        local = []
        for model, share in zip(models, shares, strict=True):
            acc = self.window(subject, model, share, k)
            local.append(gradient_arrays(acc, model))
        mean = {name: sum(g[name] for g in local) / len(local) for name in local[0]}
        return [dict(mean) for _ in models]


class NominalKOnPartialWindows(Recipe):
    name = "nominal_k_on_partial_window"
    summary = ("every micro-batch mean is divided by the configured k (reduction='mean_nominal'), also in a "
               "last window that holds fewer micro-batches: that window's gradient is held/k too small")
    accumulates_with = "mean_nominal"


class LightningStepsOnTheEpochsLastBatch(Recipe):
    name = "short_epoch_window_divided_by_k"
    summary = ("Lightning's automatic optimization: each micro-batch's mean loss is divided by "
               "accumulate_grad_batches = k, and the optimizer steps once k batches of the epoch are done or on "
               "the epoch's last batch; an epoch shorter than k is one window of N < k micro-batches whose gradient "
               "is N/k of its mean, every epoch, with no warning")
    accumulates_with = "sum"

    def backward(self, acc: Accumulator, loss: Tensor, items: int) -> None:
        # ClosureResult.from_training_step_output: closure_loss / accumulate_grad_batches, whatever the window holds
        acc.backward(loss * (1.0 / max(items, 1) / acc.steps), num_items=items)

    def train(self, subject: Subject, model: Module, optimizer: Optimizer, scheduler: LRScheduler | None,
              epoch: Sequence[Rows], k: int, epochs: int, max_norm: float | None = None) -> None:
        acc = self.accumulator(subject, model, k)
        for _ in range(epochs):
            for ready, rows in enumerate(epoch, start=1):  # batch_progress.current.ready, reset every epoch
                loss, items = subject.loss(model, rows)
                self.backward(acc, loss, items)
                # _TrainingEpochLoop._should_accumulate: step when k are done or on the epoch's last batch
                if ready % k == 0 or ready == len(epoch):
                    lr = scheduler.step() if scheduler is not None else None
                    if max_norm is not None:
                        self.clip(acc, max_norm)
                    self.step(optimizer, model, acc, lr)
                    acc.zero()


class BurnDropsThePartialWindow(Recipe):
    name = "burn_partial_window_dropped"
    summary = ("Burn's epoch loop before PR #5729: the learning-rate scheduler advances on every micro-batch (k - 1 "
               "of every k values unused, the schedule k times too fast), the optimizer steps once k micro-batches "
               "are accumulated, and the epoch's last, partial window is dropped: an epoch shorter than k never "
               "steps (normalized by the window's items here; Burn's sum without dividing is its own exhibit)")

    def train(self, subject: Subject, model: Module, optimizer: Optimizer, scheduler: LRScheduler | None,
              epoch: Sequence[Rows], k: int, epochs: int, max_norm: float | None = None) -> None:
        acc = self.accumulator(subject, model, k)
        for _ in range(epochs):
            held = 0
            for rows in epoch:
                loss, items = subject.loss(model, rows)
                self.backward(acc, loss, items)
                lr = scheduler.step() if scheduler is not None else None  # learner.lr_step() per micro-batch
                held += 1
                if held == k:
                    if max_norm is not None:
                        self.clip(acc, max_norm)
                    self.step(optimizer, model, acc, lr)
                    acc.zero()
                    held = 0
            acc.zero()  # the epoch ends: a partial window's gradients never reach the optimizer


class AdamCountsMicroBatches(Recipe):
    name = "adam_counts_micro_batches"
    summary = ("the optimizer's step counter (Adam's bias correction) and its weight decay advance on every "
               "micro-batch, not once per window")

    def after_micro_batch(self, optimizer: Optimizer, model: Module, scheduler: LRScheduler | None,
                          last: bool) -> None:
        if last:
            return  # the real step follows and counts, and decays, once more
        lr = scheduler.current() if scheduler is not None else optimizer.lr
        decay = float(optimizer.param_groups[0].get("weight_decay", 0.0))
        for name, p in model.named_parameters():
            slots = optimizer.state.setdefault(name, {})
            slots["step"] = int(slots.get("step", 0)) + 1
            if decay:
                p.data *= p.data.dtype.type(1.0 - lr * decay)


class ClipsEachMicroBatch(Recipe):
    name = "clip_per_micro_batch"
    summary = ("the running gradient is clipped after every micro-batch's backward, not once before the step: "
               "early micro-batches are clipped again and again")

    def window(self, subject: Subject, model: Module, parts: Sequence[Rows], steps: int,
               acc: Accumulator | None = None, max_norm: float | None = None,
               after: Callable[[bool], None] | None = None, **options: Any) -> GradientSource:
        scale = 1.0 / max(_window_items(subject, model, parts), 1)
        running = Gradients()
        for index, rows in enumerate(parts):
            loss, _ = subject.loss(model, rows)
            grads = loss.backward()
            for p, g in grads.items():
                total = g * g.dtype.type(scale) + running.get(p, 0)
                running.set(p, total)
            if max_norm is not None:
                clip_grad_norm(running, max_norm)
            if after is not None:
                after(index == len(parts) - 1)
        return running

    def clip(self, source: GradientSource, max_norm: float) -> None:
        """Already clipped, micro-batch by micro-batch."""


class SummedWithoutDividing(Recipe):
    name = "sum_without_dividing"
    summary = ("micro-batch mean losses are summed over the window and never divided (the user is told to lower "
               "the learning rate by hand): the gradient is k times the window's mean")
    accumulates_with = "sum"

    def backward(self, acc: Accumulator, loss: Tensor, items: int) -> None:
        acc.backward(loss * (1.0 / max(items, 1)), num_items=items)


class ScheduledPerMicroBatch(Recipe):
    name = "scheduler_per_micro_batch"
    summary = "the learning-rate scheduler advances on every micro-batch: a schedule of S steps ends after S/k"

    def after_micro_batch(self, optimizer: Optimizer, model: Module, scheduler: LRScheduler | None,
                          last: bool) -> None:
        if not last and scheduler is not None:
            scheduler.step()


class ResetAtEveryBackward(Recipe):
    name = "reset_every_backward"
    summary = ("every backward is treated as the window's boundary, which resets the accumulated gradient: only "
               "the last micro-batch reaches the optimizer (normalized by the whole window's items)")
    accumulates_with = "sum"

    def window(self, subject: Subject, model: Module, parts: Sequence[Rows], steps: int,
               acc: Accumulator | None = None, max_norm: float | None = None,
               after: Callable[[bool], None] | None = None, **options: Any) -> GradientSource:
        scale = 1.0 / max(_window_items(subject, model, parts), 1)
        acc = acc if acc is not None else self.accumulator(subject, model, steps, **options)
        for index, rows in enumerate(parts):
            if acc.micro_step:
                acc.zero()  # the boundary: what the window held is dropped
            loss, counted = subject.loss(model, rows)
            acc.backward(loss * scale, num_items=counted)
            if after is not None:
                after(index == len(parts) - 1)
        return acc


class Float32Accumulator(Recipe):
    name = "float32_accumulator"
    summary = ("the accumulated gradients are kept in float32 under a float64 model (a running mean of the "
               "micro-batch gradients, cast back to the model's dtype at the step)")

    def window(self, subject: Subject, model: Module, parts: Sequence[Rows], steps: int,
               acc: Accumulator | None = None, max_norm: float | None = None,
               after: Callable[[bool], None] | None = None, **options: Any) -> GradientSource:
        items = max(_window_items(subject, model, parts), 1)
        running: dict[int, tuple[Any, np.ndarray]] = {}
        for index, rows in enumerate(parts):
            loss, _ = subject.loss(model, rows)
            for p, g in loss.backward().items():
                share = np.asarray(g, dtype=np.float32) * np.float32(len(parts) / items)
                _, mean = running.get(id(p), (p, np.zeros(p.shape, dtype=np.float32)))
                running[id(p)] = (p, mean + (share - mean) / np.float32(index + 1))  # a running mean, in float32
            if after is not None:
                after(index == len(parts) - 1)
        window = Gradients()
        for p, mean in running.values():
            window.set(p, mean.astype(p.dtype))
        return window
