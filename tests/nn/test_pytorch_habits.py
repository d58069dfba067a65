"""The PyTorch spellings a model author reaches for: nn.Parameter, register_buffer, layer_norm's
(normalized_shape, weight, bias, eps) order and bias=False, Tensor.dim(), mta.long."""

from __future__ import annotations

import numpy as np
import pytest

import minitorch_accum as mta
from minitorch_accum import nn
from minitorch_accum.nn import functional as F
from minitorch_accum.testing import gradcheck


class NanoLayerNorm(nn.Module):
    """nanoGPT's LayerNorm, as written there."""

    def __init__(self, ndim: int, bias: bool) -> None:
        super().__init__()
        self.weight = nn.Parameter(mta.ones(ndim, dtype="float64"))
        self.bias = nn.Parameter(mta.zeros(ndim, dtype="float64")) if bias else None

    def forward(self, input: mta.Tensor) -> mta.Tensor:
        return F.layer_norm(input, self.weight.shape, self.weight, self.bias, 1e-5)


@pytest.mark.parametrize("bias", [True, False])
def test_layer_norm_in_pytorchs_argument_order_and_without_bias(bias: bool) -> None:
    rng = np.random.default_rng(0)
    x = mta.tensor(rng.normal(size=(2, 3, 4)), dtype="float64", requires_grad=True)
    ours = NanoLayerNorm(4, bias)
    assert [n for n, _ in ours.named_parameters()] == (["weight", "bias"] if bias else ["weight"])
    reference = nn.LayerNorm(4, bias=bias, dtype="float64")
    np.testing.assert_allclose(ours(x).numpy(), reference(x).numpy(), rtol=1e-15)
    assert reference.bias is None or reference.bias.shape == (4,)
    gradcheck(lambda t, w: F.layer_norm(t, (4,), weight=w) * 2.0, [x, ours.weight], atol=1e-5)
    with pytest.raises(mta.OpError, match=r"normalized_shape \(3, 4\) does not match the last axis"):
        F.layer_norm(x, (3, 4))
    np.testing.assert_allclose(F.layer_norm(x, 4).numpy(), F.layer_norm(x).numpy(), rtol=0)


def test_parameter_from_a_tensor_and_register_buffer() -> None:
    class Masked(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.scale = nn.Parameter(mta.ones(3))
            self.register_buffer("mask", mta.tril(mta.ones(3, 3)).view(1, 3, 3))
            self.register_buffer("scratch", mta.zeros(2), persistent=False)

    model = Masked()
    assert isinstance(model.scale, nn.Param) and model.scale.requires_grad
    assert isinstance(model.mask, nn.Buffer) and isinstance(model.mask, mta.Tensor)
    assert model.mask[:, :2, :2].eq(0).tolist() == [[[False, True], [False, False]]]
    assert set(model.to_record()) == {"scale", "mask"}  # the persistent buffer is saved, scratch is not
    model.to(dtype="float64")
    assert model.mask.dtype == mta.float64 and not model.mask.requires_grad


def test_dim_and_long() -> None:
    assert mta.zeros(2, 3, 4).dim() == 3
    assert mta.arange(3, dtype=mta.long).dtype == mta.int64 and mta.long == mta.int64
