"""The ready Classifier step and the test of a replayable step, against numbers computed by hand:
padding targets (``ignore_index``) count nowhere, a validation loss is a sum, inputs take the
parameters' dtype unless told otherwise, and ``replayable`` says no (never raises) to a step whose
parts are not all its class's."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from minitorch_accum import nn
from minitorch_accum.train.step import Classifier, TrainOutput, replayable

PAD = 7  # an ignore_index of the caller's own, not PyTorch's -100


def _classifier(dtype: str = "float64", **kwargs: Any) -> Classifier:
    layer = nn.Linear(3, 4, dtype=dtype, rng=np.random.default_rng(0))
    return Classifier(layer, ignore_index=PAD, **kwargs)


def _batch() -> tuple[np.ndarray, np.ndarray]:
    x = np.random.default_rng(1).standard_normal((5, 3)).astype(np.float32)
    return x, np.array([0, PAD, 2, 3, PAD])


def _by_hand(step: Classifier, x: np.ndarray, y: np.ndarray) -> tuple[float, int, int]:
    """The summed cross entropy, the items and the correct predictions over the rows not padded."""
    w, b = (p.numpy() for p in step.module.parameters())
    logits = x.astype(np.float64) @ w + b  # a Linear's weight is (in, out)
    kept = y != PAD
    z = logits[kept]
    logsumexp = np.log(np.exp(z - z.max(axis=1, keepdims=True)).sum(axis=1)) + z.max(axis=1)
    loss = float((logsumexp - z[np.arange(len(z)), y[kept]]).sum())
    return loss, int(kept.sum()), int((logits.argmax(axis=1) == y)[kept].sum())


def test_a_train_step_sums_the_loss_over_the_rows_that_are_not_padding() -> None:
    step = _classifier()
    assert step.loss_reduction == "sum"  # the Learner's default: items normalize the window
    x, y = _batch()
    out = step.train_step((x, y))
    loss, items, correct = _by_hand(step, x, y)
    assert isinstance(out, TrainOutput) and out.reduction == "sum"
    assert out.num_items == items == 3 and out.correct == correct
    assert float(out.loss.item()) == pytest.approx(loss, rel=1e-12)


def test_a_validation_step_gives_the_summed_loss_its_items_and_correct_predictions() -> None:
    step = _classifier()
    step.loss_reduction = "mean"  # what the Learner sets for a mean reduction: validation still sums
    x, y = _batch()
    out = step.valid_step((x, y))
    loss, items, correct = _by_hand(step, x, y)
    assert (out.num_items, out.correct) == (items, correct)
    assert out.loss_sum == pytest.approx(loss, rel=1e-12)


def test_inputs_take_the_parameters_dtype_unless_the_step_is_told_another() -> None:
    x, y = _batch()
    assert _classifier("float64").step_inputs((x, y))[0].dtype == np.float64
    assert _classifier("float32").step_inputs((x, y))[0].dtype == np.float32
    assert _classifier("float64", input_dtype="float32").step_inputs((x, y))[0].dtype == np.float32
    ids = np.array([[1, 2], [0, 3]])
    assert _classifier().step_inputs((ids, y))[0] is ids  # integer inputs (token ids) pass as they are
    # a module without parameters: float32 on the CPU
    assert Classifier(nn.ReLU()).step_inputs((x.astype(np.float64), y))[0].dtype == np.float32


def test_padding_that_is_also_a_class_is_never_counted_correct() -> None:
    # padding token 0 of a vocabulary, say: a padded row predicted as that class is no correct item
    step = _classifier()
    x, _ = _batch()
    predicted = step.forward(step.step_inputs((x, np.zeros(5, dtype=np.int64)))[0]).numpy().argmax(axis=1)
    pad = int(predicted[1])
    step.ignore_index = pad
    y = np.array([(predicted[i] + 1) % 4 if i != 1 else pad for i in range(5)])  # every other row wrong
    assert step.train_step((x, y)).correct == 0
    assert step.valid_step((x, y)).correct == 0


class _Parts:
    def step_inputs(self, batch: Any) -> Any:
        return batch

    def step_forward(self, *inputs: Any) -> Any:
        return inputs

    def step_output(self, batch: Any, outputs: Any) -> Any:
        return outputs

    def train_step(self, batch: Any) -> Any:
        return self.step_output(batch, self.step_forward(*self.step_inputs(batch)))


class _Slotted:  # no __dict__ anywhere in its classes
    __slots__ = ()

    step_inputs, step_forward, step_output, train_step = (_Parts.step_inputs, _Parts.step_forward,
                                                          _Parts.step_output, _Parts.train_step)


class _NoOutput:
    def train_step(self, batch: Any) -> Any:
        return batch

    def step_inputs(self, batch: Any) -> Any:
        return batch

    def step_forward(self, *inputs: Any) -> Any:
        return inputs


def test_replayable_says_which_steps_are_their_parts_and_never_raises() -> None:
    assert replayable(_Parts()) and replayable(_Slotted())  # a step without a __dict__ of its own too
    assert replayable(_classifier())
    assert not replayable(_NoOutput())  # a part missing
    given = _NoOutput()
    given.step_output = lambda batch, outputs: outputs  # type: ignore[attr-defined]  # no class defines it
    assert not replayable(given)
    own = _Parts()
    own.train_step = lambda batch: batch  # type: ignore[method-assign]
    assert not replayable(own)
