"""Linear layer, stored as Burn stores it: weight (in, out), y = x @ W + b."""

from __future__ import annotations

from typing import Any

import numpy as np

from minitorch_accum.autodiff import Tensor
from minitorch_accum.backend import DeviceLike
from minitorch_accum.nn import functional as F
from minitorch_accum.nn.init import kaiming_uniform
from minitorch_accum.nn.module import Module, weight_orientation
from minitorch_accum.ops.function import OpError

__all__ = ["Linear"]


class Linear(Module):
    """y = x @ weight + bias, weight of shape (in_features, out_features).

    With the weight stored (in, out), its gradient x^T @ dy is one GEMM whose output
    has the weight's own layout, so it can be written straight into a gradient buffer.

    Tying: assigning a Param of shape (out, in), such as an Embedding's (vocab, dim)
    table (``lm_head.weight = wte.weight``), makes this layer use it transposed
    (y = x @ W^T + b, PyTorch's layout); ``weight_transposed`` says which is in use.
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True, *, dtype: Any = None,
                 device: DeviceLike | None = "cpu", rng: np.random.Generator | None = None) -> None:
        if in_features <= 0 or out_features <= 0:
            raise ValueError(f"Linear: features must be positive, got ({in_features}, {out_features})")
        self.in_features = in_features
        self.out_features = out_features
        init = {"dtype": dtype, "device": device, "rng": rng}
        self.weight = kaiming_uniform((in_features, out_features), in_features, layout="in_out", **init)
        self.bias = kaiming_uniform((out_features,), in_features, **init) if bias else None

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "weight":
            own = (self.in_features, self.out_features)
            object.__setattr__(self, "weight_transposed", weight_orientation("Linear", value, own, "in_out"))
        object.__setattr__(self, name, value)

    def forward(self, x: Tensor) -> Tensor:
        if x.ndim == 0 or x.shape[-1] != self.in_features:
            raise OpError(f"Linear: expected input with last axis {self.in_features}, got shape {x.shape}")
        return F.linear(x, self.weight.mT if self.weight_transposed else self.weight, self.bias)

    def extra_repr(self) -> str:
        tied = ", weight used transposed" if self.weight_transposed else ""
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}{tied}")
