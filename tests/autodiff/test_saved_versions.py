"""An input the forward saved, changed in place before the backward, is refused: a write through the
library's API by the version counter (PyTorch's), a raw write to a leaf's ``.data`` by the checksum of
its whole array, a raw write to an op result's under ``detect_raw_writes``."""

from __future__ import annotations

import numpy as np
import pytest

import minitorch_accum as mta
from minitorch_accum import nn, optim
from minitorch_accum.accum import Accumulator
from minitorch_accum.autodiff import InPlaceModificationError, detect_raw_writes
from minitorch_accum.autodiff.saved_versions import raw_writes_detected
from minitorch_accum.distributed import LocalCommunicator
from minitorch_accum.distributed.parameter_sync import broadcast_parameters
from minitorch_accum.models import CharTransformer, TransformerConfig
from minitorch_accum.nn import functional as F
from minitorch_accum.nn import init


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
    with pytest.raises(InPlaceModificationError, match=r"linear saved its input 1, Param\(shape=\(3, 2\)") as info:
        loss.backward()
    assert info.value.op == "linear" and info.value.tensor is model[2].weight
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
    with pytest.raises(InPlaceModificationError, match="bytes changed"):
        loss.backward()


def test_a_raw_write_inside_the_array_is_seen_not_only_at_its_ends() -> None:
    # the case: w.data[1:3] = 100 gave the gradient [2, 100, 100, 2] of w * w silently
    w = mta.tensor([1.0, 1.0, 1.0, 1.0], dtype="float64", requires_grad=True)
    loss = (w * w).sum()
    w.data[1:3] = 100
    with pytest.raises(InPlaceModificationError, match=r"mul saved its input 0, Tensor\(shape=\(4,\).*bytes changed"):
        loss.backward()


def test_a_raw_write_to_one_weight_element_is_named_by_the_accumulator() -> None:
    # the other case: Linear.weight.data[3, 1] += 50, neither the first nor the last element
    model = _model()
    x, y = _batch()
    acc = Accumulator(model, steps=1)
    loss = F.cross_entropy(model(x), y, reduction="sum")
    model[0].weight.data[3, 1] += 50
    with pytest.raises(InPlaceModificationError, match=r"parameter '0\.weight' Param\(shape=\(4, 3\).*bytes changed"):
        acc.backward(loss, num_items=5)


def test_a_swap_of_two_elements_is_seen() -> None:
    # the checksum depends on the order of the bytes: a sum or an XOR of the words would miss this
    w = mta.tensor([1.0, 2.0, 3.0, 4.0], dtype="float64", requires_grad=True)
    loss = (w * w * w).sum()
    w.data[[0, 3]] = w.data[[3, 0]]
    with pytest.raises(InPlaceModificationError, match="bytes changed"):
        loss.backward()


_INITIALIZERS = [init.uniform_, init.normal_, init.trunc_normal_, init.xavier_uniform_, init.xavier_normal_,
                 init.kaiming_uniform_, init.kaiming_normal_, init.zeros_, init.ones_,
                 lambda t: init.constant_(t, 0.5)]


@pytest.mark.parametrize("write", [
    *[pytest.param(fn, id=f"nn.init.{getattr(fn, '__name__', 'constant_')}") for fn in _INITIALIZERS],
    pytest.param(lambda t: broadcast_parameters(_Holder(t), LocalCommunicator()), id="broadcast_parameters"),
    pytest.param(lambda t: optim.SGD(0.1).step(_Holder(t), (t * 2.0).sum().backward()), id="SGD.step"),
    pytest.param(lambda t: optim.AdamW(lr=0.1).step(_Holder(t), (t * 2.0).sum().backward()), id="AdamW.step"),
])
def test_every_in_place_write_of_the_api_is_refused_by_its_version(write: object) -> None:
    w = nn.Param(np.random.default_rng(0).normal(size=(3, 2)))
    h = mta.tensor(np.random.default_rng(1).normal(size=(4, 3)), dtype="float64")
    loss = (h @ w).sum()
    write(w)  # type: ignore[operator]
    with pytest.raises(InPlaceModificationError, match="version went from 0 to 1"):
        loss.backward()


class _Holder(nn.Module):
    def __init__(self, w: nn.Param) -> None:
        self.w = w


def test_a_write_through_a_view_of_a_saved_array_is_seen() -> None:
    w = nn.Param(np.arange(6.0).reshape(3, 2))
    h = mta.tensor(np.ones((4, 3)), dtype="float64")
    for write, seen_by in ((lambda: w.data[1:, 0].__setitem__(Ellipsis, 7.0), "bytes changed"),  # a NumPy view
                           (lambda: w.mT.data.__setitem__((1, 2), 7.0), "bytes changed"),  # an op's view's array
                           (lambda: init.zeros_(w.detach()), "version went from")):  # detach shares the version
        w.data[...] = np.arange(6.0).reshape(3, 2)
        loss = (h @ w).sum()
        write()
        with pytest.raises(InPlaceModificationError, match=seen_by):
            loss.backward()


def test_a_raw_write_to_the_array_a_saved_view_views_is_seen() -> None:
    # a tied head saves table.mT; a hand-written step writes the table itself
    table = nn.Param(np.random.default_rng(0).normal(size=(6, 3)))
    h = mta.tensor(np.random.default_rng(1).normal(size=(2, 3)), dtype="float64")
    loss = (h @ table.mT).sum()
    table.data[2, 1] -= 0.5
    with pytest.raises(InPlaceModificationError, match=r"matmul saved its input 1, .*a view of Param\(shape=\(6, 3\)"):
        loss.backward()


def test_a_raw_write_to_a_batch_is_seen() -> None:
    w = nn.Param(np.ones((3, 2)))
    x = mta.tensor(np.random.default_rng(1).normal(size=(4, 3)), dtype="float64")
    loss = (x @ w).sum()
    x.data[2, 2] = 0.0
    with pytest.raises(InPlaceModificationError, match="matmul saved its input 0"):
        loss.backward()


def test_writes_before_the_forward_and_after_the_backward_are_allowed() -> None:
    model = _model()
    x, y = _batch()
    model[0].weight.data[3, 1] += 50  # before the forward: the forward reads the new values
    init.zeros_(model[2].bias)
    grads = F.cross_entropy(model(x), y, reduction="sum").backward()
    model[0].weight.data[1:3] = 100  # after the backward: that graph is gone
    init.ones_(model[2].weight)
    x.data[0, 0] = 9.0
    assert set(grads) == set(model.parameters())
    F.cross_entropy(model(x), y, reduction="sum").backward()


def test_nothing_written_no_error_with_a_tied_weight_steps_between_windows_and_every_array_hashed() -> None:
    mta.manual_seed(0)
    model = CharTransformer(TransformerConfig(vocab_size=11, block_size=8, n_layer=1, n_head=2, n_embd=8),
                            dtype="float64")
    assert model.wte.weight is model.head.weight  # used twice in one forward: by the embedding and the head
    ids = np.random.default_rng(0).integers(0, 11, size=(3, 9))
    x, y = mta.tensor(ids[:, :-1]), mta.tensor(ids[:, 1:])
    opt = optim.AdamW(lr=1e-2)
    acc = Accumulator(model, steps=2)
    with detect_raw_writes(True):
        for _ in range(2):
            for _ in range(2):
                acc.backward(F.cross_entropy(model(x), y, reduction="sum"), num_items=y.numel())
            model = opt.step(model, acc)  # after the window's last backward: no graph saw the old values
            acc.zero()
    assert acc.micro_step == 0


def test_a_kept_op_result_written_raw_is_seen_only_under_detect_raw_writes() -> None:
    # the default hashes the leaves' arrays only; an activation costs ~5% of a micro-batch to hash
    w = nn.Param(np.random.default_rng(0).normal(size=(3, 3)))
    x = mta.tensor(np.random.default_rng(1).normal(size=(2, 3)), dtype="float64")
    hidden = (x @ w).tanh()
    loss = (hidden @ w).sum()  # matmul saves hidden, an op's result
    hidden.data[0, 0] = 5.0
    loss.backward()  # not seen: documented in saved_versions.py and docs/design.md
    assert not raw_writes_detected()
    with detect_raw_writes(True):
        assert raw_writes_detected()
        hidden = (x @ w).tanh()
        loss = (hidden @ w).sum()
        hidden.data[0, 0] = 5.0
        with pytest.raises(InPlaceModificationError, match=r"matmul saved its input 0, Tensor\(shape=\(2, 3\)"):
            loss.backward()
    assert not raw_writes_detected()  # the block put the setting back


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
