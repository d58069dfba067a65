"""LayerNorm (per item, accumulation-safe) and BatchNorm1d (couples the items of a batch)."""

from __future__ import annotations

from typing import Any

from minitorch_accum.autodiff import Tensor
from minitorch_accum.backend import DeviceLike, backend_for, resolve_dtype
from minitorch_accum.nn import functional as F
from minitorch_accum.nn.init import constant
from minitorch_accum.nn.module import Buffer, Module

__all__ = ["BatchNorm1d", "LayerNorm"]


class LayerNorm(Module):
    """Normalize the last axis of size ``d`` (eps=1e-5 as in Burn and PyTorch); ``bias=False``
    leaves the shift out, as PyTorch's."""

    def __init__(self, d: int, eps: float = 1e-5, *, bias: bool = True, dtype: Any = None,
                 device: DeviceLike | None = "cpu") -> None:
        self.d = d
        self.eps = eps
        self.weight = constant((d,), 1.0, dtype=dtype, device=device)
        self.bias = constant((d,), 0.0, dtype=dtype, device=device) if bias else None

    def forward(self, x: Tensor) -> Tensor:
        return F.layer_norm(x, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return f"{self.d}, eps={self.eps}" + ("" if self.bias is not None else ", bias=False")


class BatchNorm1d(Module):
    """Batch normalization over (N, C) or (N, C, L) input.

    In training mode the statistics come from the current batch, so the output for
    one item depends on the others: k micro-batches of b items do NOT give the
    gradient of one batch of k*b items. Kept for studying exactly that.
    """

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float = 0.1, *,
                 dtype: Any = None, device: DeviceLike | None = "cpu") -> None:
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.weight = constant((num_features,), 1.0, dtype=dtype, device=device)
        self.bias = constant((num_features,), 0.0, dtype=dtype, device=device)
        xp = backend_for(device).xp
        # running statistics stay in float32 at least, as PyTorch keeps them
        stat_dtype = resolve_dtype(dtype) if resolve_dtype(dtype).itemsize >= 4 else resolve_dtype("float32")
        self.running_mean = Buffer(xp.zeros(num_features, dtype=stat_dtype))
        self.running_var = Buffer(xp.ones(num_features, dtype=stat_dtype))

    def forward(self, x: Tensor) -> Tensor:
        return F.batch_norm(x, self.weight, self.bias, self.running_mean.value, self.running_var.value,
                            training=self.training, momentum=self.momentum, eps=self.eps)

    def extra_repr(self) -> str:
        return f"{self.num_features}, eps={self.eps}, momentum={self.momentum}"
