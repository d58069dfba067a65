"""Weight tying written the PyTorch way: one Param shared by an Embedding and an output projection.

Linear stores (in, out) and Embedding (vocab, dim), so the tied Param has the transposed
shape for one of them; that layer then uses it transposed. The Param appears once in
parameters() and its gradient is the sum of both uses.
"""

from __future__ import annotations

import numpy as np
import pytest

import minitorch_accum as mta
from minitorch_accum import nn
from minitorch_accum.nn import functional as F


class TinyLM(nn.Module):
    def __init__(self, vocab: int, dim: int, tie: str) -> None:
        rng = np.random.default_rng(0)
        self.wte = nn.Embedding(vocab, dim, dtype="float64", rng=rng)
        self.lm_head = nn.Linear(dim, vocab, bias=False, dtype="float64", rng=rng)
        if tie == "head_takes_table":
            self.lm_head.weight = self.wte.weight
        elif tie == "table_takes_head":  # nanoGPT's spelling
            self.wte.weight = self.lm_head.weight

    def forward(self, ids: np.ndarray) -> mta.Tensor:
        return self.lm_head(self.wte(ids).tanh())


def reference_grad(table: np.ndarray, ids: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """The gradient of the same loss with the two uses as separate leaves, summed by hand."""
    as_table = mta.tensor(table, dtype="float64", requires_grad=True)
    as_head = mta.tensor(table, dtype="float64", requires_grad=True)
    logits = F.linear(F.embedding(ids, as_table).tanh(), as_head.mT)
    grads = F.cross_entropy(logits, targets).backward()
    return grads[as_table] + grads[as_head]


@pytest.mark.parametrize("tie", ["head_takes_table", "table_takes_head"])
def test_tied_param_appears_once_and_gets_the_sum_of_both_gradients(tie: str) -> None:
    model = TinyLM(7, 3, tie)
    assert model.wte.weight is model.lm_head.weight
    assert len(model.parameters()) == 1 and model.num_params() == 21
    table = model.wte.weight.numpy() if tie == "head_takes_table" else model.wte.weight.numpy().T
    ids = np.array([[0, 3, 3, 6], [1, 2, 5, 3]])
    targets = np.array([[3, 3, 0, 1], [6, 6, 2, 4]])
    grads = F.cross_entropy(model(ids), targets).backward()
    expected = reference_grad(table, ids, targets)
    got = grads[model.wte.weight]
    np.testing.assert_allclose(got if tie == "head_takes_table" else got.T, expected, rtol=1e-13, atol=1e-15)


def test_tied_head_computes_x_times_the_table_transposed() -> None:
    model = TinyLM(5, 2, "head_takes_table")
    h = mta.tensor(np.random.default_rng(1).normal(size=(3, 2)), dtype="float64")
    table = model.wte.weight.numpy()
    np.testing.assert_allclose(model.lm_head(h).numpy(), h.numpy() @ table.T, rtol=1e-14)
    np.testing.assert_allclose((h @ model.wte.weight.mT).numpy(), h.numpy() @ table.T, rtol=1e-14)
    np.testing.assert_allclose(F.linear(h, model.wte.weight.mT).numpy(), h.numpy() @ table.T, rtol=1e-14)
    assert "weight used transposed" in repr(model.lm_head)


def test_a_square_table_is_oriented_by_its_layout() -> None:
    # vocab == dim: the shape cannot tell (in, out) from (out, in); the Param's layout can
    wte, head = nn.Embedding(4, 4, dtype="float64"), nn.Linear(4, 4, bias=False, dtype="float64")
    head.weight = wte.weight
    h = np.eye(4)[:2]
    np.testing.assert_allclose(head(mta.tensor(h, dtype="float64")).numpy(), h @ wte.weight.numpy().T)
    other = nn.Linear(4, 4, bias=False, dtype="float64")
    other.weight = nn.Linear(4, 4, dtype="float64").weight  # Linear to Linear: as it is
    assert not other.weight_transposed
    mine = nn.Linear(4, 4, bias=False, dtype="float64")
    mine.weight = nn.Param(np.eye(4))  # made by hand: taken in the layer's own layout
    assert not mine.weight_transposed


def test_a_weight_that_fits_neither_layout_is_refused() -> None:
    head = nn.Linear(3, 5)
    with pytest.raises(ValueError, match=r"Linear.weight: a Param of shape \(4, 3\) fits neither \(in, out\) = "
                                         r"\(3, 5\) nor its transpose \(5, 3\)"):
        head.weight = nn.Embedding(4, 3).weight
    with pytest.raises(TypeError, match=r"Embedding\.weight must be a Param, got ndarray"):
        nn.Embedding(4, 3).weight = np.zeros((4, 3))


def test_pytorch_layout_weight_in_f_linear_says_to_transpose() -> None:
    table = nn.Embedding(6, 3).weight
    with pytest.raises(mta.OpError, match=r"linear: weight of shape \(6, 3\) does not fit input of shape \(2, 3\).*"
                                          r"write F.linear\(x, weight.mT\)"):
        F.linear(mta.zeros(2, 3), table)
