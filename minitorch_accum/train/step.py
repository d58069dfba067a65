"""The step protocol, after Burn's TrainStep/ValidStep, and a ready Classifier.

A model plugs into the Learner by offering ``train_step(batch) -> TrainOutput`` and
``valid_step(batch) -> ValidOutput``. The Learner sets ``loss_reduction`` on the
step object before training: ``"sum"`` when the window is normalized by items or summed
(the step must then return the *summed* loss of its micro-batch and its item count),
``"mean"`` for the mean reductions (``mean``, ``mean_nominal``). A step that also offers
``train_step``'s three parts (``ReplayableStep``: its inputs, its forward, its output) has its
forward captured and replayed by the Learner (the ``replay`` setting); the Classifier does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from minitorch_accum.autodiff import Tensor, no_grad, tensor
from minitorch_accum.nn import Module
from minitorch_accum.nn import functional as F

__all__ = ["Classifier", "ReplayableStep", "TrainOutput", "TrainStep", "ValidOutput", "replayable"]


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


class ReplayableStep(TrainStep, Protocol):
    """A train step in three parts, so that the Learner can replay its forward (``replay`` setting,
    ``autodiff.Replay``): ``train_step(batch)`` is ``step_output(batch, step_forward(*step_inputs(batch)))``.
    ``step_forward`` is the part replayed: tensors and arrays in, tensors out, nothing computed in
    Python from its inputs' values (that belongs in ``step_inputs`` or ``step_output``)."""

    def step_inputs(self, batch: Any) -> tuple[Any, ...]:
        """The batch as the Tensors and arrays ``step_forward`` takes."""

    def step_forward(self, *inputs: Any) -> Any:
        """The loss (and any tensor ``step_output`` needs) of a micro-batch."""

    def step_output(self, batch: Any, outputs: Any) -> TrainOutput:
        """The micro-batch's TrainOutput from the batch and what ``step_forward`` returned."""


_PARTS = ("step_inputs", "step_forward", "step_output")


def replayable(step: Any) -> bool:
    """Whether ``step`` is a ReplayableStep whose ``train_step`` is its parts: it has the three, and
    none comes from above the class of its ``train_step`` (a subclass that overrides ``train_step``
    alone, to do more per micro-batch, is not replayed: that Python would be skipped)."""
    if not all(callable(getattr(step, name, None)) for name in ("train_step", *_PARTS)):
        return False
    if "train_step" in getattr(step, "__dict__", {}):  # a train_step of this object's own
        return False
    composer = _defined_by(type(step), "train_step")
    return all(issubclass(_defined_by(type(step), name), composer) for name in _PARTS)


def _defined_by(cls: type, name: str) -> type:
    """The class of ``cls``'s MRO whose body defines ``name`` (``object`` when none does)."""
    return next((klass for klass in cls.__mro__ if name in vars(klass)), object)


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
        return self.step_output(batch, self.step_forward(*self.step_inputs(batch)))

    # the three parts of train_step, so that the Learner can replay the middle one (ReplayableStep)
    def step_inputs(self, batch: Any) -> tuple[Any, Any]:
        x, y = batch
        return self._inputs(x), self._targets(y)

    def step_forward(self, x: Any, targets: Any) -> tuple[Tensor, Tensor]:
        logits = self(x)
        loss = F.cross_entropy(logits, targets, reduction=self.loss_reduction, ignore_index=self.ignore_index)
        return loss, logits

    def step_output(self, batch: Any, outputs: tuple[Tensor, Tensor]) -> TrainOutput:
        loss, logits = outputs
        y = np.asarray(batch[1])
        items = F.count_items(y, self.ignore_index)
        return TrainOutput(loss, items, self.loss_reduction, _correct(logits, y, self.ignore_index))

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
