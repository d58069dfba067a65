"""The step protocol, after Burn's TrainStep/ValidStep, and a ready Classifier.

A model plugs into the Learner by offering ``train_step(batch) -> TrainOutput`` and
``valid_step(batch) -> ValidOutput``. The Learner sets ``loss_reduction`` on the
step object before training: ``"sum"`` when the window is normalized by items or summed
(the step must then return the *summed* loss of its micro-batch and its item count),
``"mean"`` for the mean reductions (``mean``, ``mean_nominal``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from minitorch_accum.autodiff import Tensor, no_grad, tensor
from minitorch_accum.nn import Module
from minitorch_accum.nn import functional as F

__all__ = ["Classifier", "TrainOutput", "TrainStep", "ValidOutput"]


@dataclass
class TrainOutput:
    """One micro-batch: its loss (summed or mean, as ``reduction`` says) and its item count."""

    loss: Tensor
    num_items: int
    reduction: str = "sum"
    correct: int | None = None
    extra: dict[str, float] = field(default_factory=dict)


@dataclass
class ValidOutput:
    loss_sum: float
    num_items: int
    correct: int | None = None


class TrainStep(Protocol):
    loss_reduction: str

    def train_step(self, batch: Any) -> TrainOutput: ...

    def valid_step(self, batch: Any) -> ValidOutput: ...


class Classifier(Module):
    """Wraps a module mapping inputs to logits (..., C); batches are (inputs, targets).

    Targets equal to ``ignore_index`` (padding) are not items: they neither count nor
    contribute to the loss.
    """

    def __init__(self, module: Module, ignore_index: int = -100, input_dtype: Any = None) -> None:
        self.module = module
        self.ignore_index = ignore_index
        self.input_dtype = input_dtype
        self.loss_reduction = "sum"

    def forward(self, x: Any) -> Tensor:
        return self.module(x)

    def _inputs(self, x: Any) -> Any:
        params = self.parameters()
        if isinstance(x, np.ndarray) and x.dtype.kind == "f":
            dtype = self.input_dtype or (params[0].dtype if params else "float32")
            return tensor(x, dtype=dtype, device=params[0].device if params else "cpu")
        if isinstance(x, np.ndarray) and params and params[0].device != "cpu":
            return tensor(x, device=params[0].device)
        return x

    def _targets(self, y: Any) -> Any:
        params = self.parameters()
        if params and params[0].device != "cpu":
            return tensor(np.asarray(y), device=params[0].device)
        return y

    def train_step(self, batch: Any) -> TrainOutput:
        x, y = batch
        logits = self(self._inputs(x))
        targets = self._targets(y)
        loss = F.cross_entropy(logits, targets, reduction=self.loss_reduction, ignore_index=self.ignore_index)
        items = F.count_items(np.asarray(y), self.ignore_index)
        return TrainOutput(loss, items, self.loss_reduction, _correct(logits, np.asarray(y), self.ignore_index))

    def valid_step(self, batch: Any) -> ValidOutput:
        x, y = batch
        with no_grad():
            logits = self(self._inputs(x))
            loss = F.cross_entropy(logits, self._targets(y), reduction="sum", ignore_index=self.ignore_index)
        return ValidOutput(float(loss.item()), F.count_items(np.asarray(y), self.ignore_index),
                           _correct(logits, np.asarray(y), self.ignore_index))


def _correct(logits: Tensor, targets: np.ndarray, ignore_index: int) -> int:
    predicted = np.asarray(logits.numpy(), dtype=np.float32).argmax(axis=-1)
    valid = targets != ignore_index
    return int(((predicted == targets) & valid).sum())
