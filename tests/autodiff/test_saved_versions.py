"""An input the forward saved, changed in place before the backward, is refused (PyTorch's version counter)."""

from __future__ import annotations

import numpy as np
import pytest

import minitorch_accum as mta
from minitorch_accum import nn, optim
from minitorch_accum.accum import Accumulator
from minitorch_accum.autodiff import InPlaceModificationError
from minitorch_accum.nn import functional as F


def _model() -> nn.Module:
    mta.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 3, dtype="float64"), nn.Tanh(), nn.Linear(3, 2, dtype="float64"))


def _batch() -> tuple[mta.Tensor, np.ndarray]:
    rng = np.random.default_rng(1)
    return mta.tensor(rng.normal(size=(5, 4)), dtype="float64"), rng.integers(0, 2, size=5)


def test_an_optimizer_step_between_forward_and_backward_is_refused_naming_op_and_tensor() -> None:
    model = _model()
    x, y = _batch()
    loss = F.cross_entropy(model(x), y, reduction="sum")
    optim.SGD(0.1).step(model, loss.backward(retain_graph=True))
    with pytest.raises(InPlaceModificationError, match=r"matmul saved its input 1, Param\(shape=\(3, 2\)") as info:
        loss.backward()
    assert info.value.op == "matmul" and info.value.tensor is model[2].weight
    assert "version went from 0 to 1" in str(info.value)


def test_every_fused_step_counts_one_write_of_each_parameter() -> None:
    model = _model()
    x, y = _batch()
    for opt in (optim.SGD(0.1, momentum=0.9), optim.AdamW(lr=1e-3)):
        before = [p.version for p in model.parameters()]
        opt.step(model, F.cross_entropy(model(x), y, reduction="sum").backward())
        assert [p.version for p in model.parameters()] == [v + 1 for v in before]


def test_the_accumulator_names_the_parameter_and_keeps_the_window_whole() -> None:
    model = _model()
    x, y = _batch()
    acc = Accumulator(model, steps=2)
    acc.backward(F.cross_entropy(model(x), y, reduction="sum"), num_items=5)
    stale = F.cross_entropy(model(x), y, reduction="sum")
    optim.SGD(0.1).step(model, acc)  # a step in the middle of a window, before the second backward
    acc.zero()
    with pytest.raises(InPlaceModificationError, match=r"parameter '(0|2)\.weight' Param"):
        acc.backward(stale, num_items=5)
    # refused before anything was written: a fresh forward goes on in the same window
    acc.backward(F.cross_entropy(model(x), y, reduction="sum"), num_items=5)
    assert acc.micro_step == 1


def test_a_raw_write_to_a_parameters_array_is_seen_on_the_host() -> None:
    model = _model()
    x, y = _batch()
    loss = F.cross_entropy(model(x), y, reduction="sum")
    model[0].weight.data -= 0.01  # a hand-written SGD step: no version counter sees it
    with pytest.raises(InPlaceModificationError, match="values changed"):
        loss.backward()


def test_a_view_counts_the_writes_of_the_tensor_it_views() -> None:
    # a tied head uses the embedding table through .mT: matmul saves the view, the step writes the table
    table = nn.Param(np.random.default_rng(0).normal(size=(6, 3)))
    h = mta.tensor(np.random.default_rng(1).normal(size=(2, 3)), dtype="float64")
    head = table.mT
    assert head.view_of is table
    loss = (h @ head).sum()
    table.bump_version()
    with pytest.raises(InPlaceModificationError, match=r"a view of Param\(shape=\(6, 3\)"):
        loss.backward()


def test_a_constant_input_written_through_the_library_is_refused() -> None:
    w = mta.tensor([1.0, 2.0], dtype="float64", requires_grad=True)
    batch = mta.tensor([3.0, 4.0], dtype="float64")
    loss = (w * batch).sum()
    batch.data[...] = 0.0
    batch.bump_version()  # as an in-place op of the library does; a raw write alone is seen on parameters only
    with pytest.raises(InPlaceModificationError, match="mul saved its input 1"):
        loss.backward()


def test_rebinding_a_parameters_array_is_harmless_and_allowed() -> None:
    # the saved array is the old one, unchanged: the gradient is that of the forward that ran
    model = _model()
    x, y = _batch()
    expected = F.cross_entropy(model(x), y, reduction="sum").backward()
    expected = {name: np.array(expected[p]) for name, p in model.named_parameters()}
    loss = F.cross_entropy(model(x), y, reduction="sum")
    for p in model.parameters():
        p.data = p.data * 2.0
    grads = loss.backward()
    for name, p in model.named_parameters():
        np.testing.assert_array_equal(grads[p], expected[name])


def test_inputs_that_no_backward_reads_are_not_watched() -> None:
    # add saves nothing: changing an operand after it changes no gradient, so it is no error
    a = mta.tensor([1.0, 2.0], dtype="float64", requires_grad=True)
    b = mta.tensor([1.0, 1.0], dtype="float64")
    loss = (a + b).sum()
    b.data[...] = 5.0
    b.bump_version()
    np.testing.assert_array_equal(loss.backward()[a], [1.0, 1.0])
