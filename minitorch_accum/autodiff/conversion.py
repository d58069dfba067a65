"""Tensor's conversions: to another device or dtype, PyTorch's dtype shorthands, a fresh copy.

``x.to(mta.float64)``, ``x.to("cuda")``, ``x.to("cuda", mta.float16)``, ``x.to(other)`` (its
device and dtype) and the keyword forms all read their arguments through
``device_and_dtype``, which ``Module.to`` shares. A float-to-float cast and a move between
devices are differentiable (the gradient comes back in the input's dtype, on its device);
a cast to or from an integer or bool dtype is not (such tensors carry no gradient).
``ConversionMixin`` holds the methods for Tensor, which inherits it.
"""

from __future__ import annotations

import builtins
from typing import Any, Self

import numpy as np

from minitorch_accum import ops
from minitorch_accum.autodiff.graph import TensorBase, apply, transfer
from minitorch_accum.backend import (
    Device,
    backend_for,
    bfloat16,
    float16,
    float32,
    float64,
    int64,
    is_float_dtype,
    parse_device,
    resolve_tensor_dtype,
)

__all__ = ["ConversionMixin", "device_and_dtype"]


def _one_argument(op: str, value: Any) -> tuple[Device | None, np.dtype | None]:
    """A positional argument of ``to``: a tensor (its device and dtype), a device or a dtype."""
    if isinstance(value, TensorBase):
        return value.backend.device, value.dtype
    if isinstance(value, Device):
        return value, None
    if isinstance(value, str):
        try:
            return parse_device(value), None
        except ValueError:
            pass
    try:
        return None, resolve_tensor_dtype(value)
    except TypeError:
        raise TypeError(f"{op}: {value!r} is neither a device ('cpu', 'cuda', 'cuda:N') nor a dtype "
                        "(mta.float64, 'float32', ...)") from None


def device_and_dtype(op: str, args: tuple[Any, ...], device: Any = None,
                     dtype: Any = None) -> tuple[Device | None, np.dtype | None]:
    """(device, dtype) of a call ``op(*args, device=..., dtype=...)`` in any of PyTorch's forms:
    ``to(dtype)``, ``to(device)``, ``to(device, dtype)``, ``to(tensor)``; None where it asks for no change."""
    if len(args) > 2:
        raise TypeError(f"{op}: takes at most a device and a dtype, got {len(args)} positional arguments")
    found_device = None if device is None else parse_device(device)
    found_dtype = None if dtype is None else resolve_tensor_dtype(dtype)
    for value in args:
        if value is None:  # to(None, dtype) as to(device=None, dtype=...): no change asked
            continue
        new_device, new_dtype = _one_argument(op, value)
        for name, new, old in (("device", new_device, found_device), ("dtype", new_dtype, found_dtype)):
            if new is not None and old is not None and new != old:
                raise TypeError(f"{op}: got two {name}s, {old} and {new}")
        found_device = new_device if new_device is not None else found_device
        found_dtype = new_dtype if new_dtype is not None else found_dtype
    return found_device, found_dtype


class ConversionMixin:
    """Devices, dtypes and copies (see the module docstring)."""

    __slots__ = ()

    def to(self, *args: Any, device: Any = None, dtype: Any = None) -> Self:
        """This tensor on another device and/or with another dtype (this tensor itself when
        neither changes, as PyTorch's): ``x.to(mta.float64)``, ``x.to("cuda:0")``,
        ``x.to("cuda", mta.float16)``, ``x.to(other)``, ``x.to(device=..., dtype=...)``."""
        target_device, target_dtype = device_and_dtype("to", args, device, dtype)
        out: Any = self
        if target_dtype is not None and target_dtype != out.dtype:
            if is_float_dtype(target_dtype) and is_float_dtype(out.dtype):
                out = apply(ops.Cast, out, dtype=target_dtype)
            else:
                out = out.wrap(out.data.astype(target_dtype))
        if target_device is not None and target_device != out.backend.device:
            out = transfer(out, backend_for(target_device))
        return out

    def cpu(self) -> Self:
        return self.to("cpu")

    def cuda(self, index: int = 0) -> Self:
        return self.to(f"cuda:{index}")

    def float(self) -> Self:
        """As float32 (PyTorch's ``x.float()``)."""
        return self.to(float32)

    def double(self) -> Self:
        """As float64 (PyTorch's ``x.double()``)."""
        return self.to(float64)

    def half(self) -> Self:
        """As float16 (PyTorch's ``x.half()``)."""
        return self.to(float16)

    def bfloat16(self) -> Self:
        """As bfloat16 (PyTorch's ``x.bfloat16()``)."""
        return self.to(bfloat16)

    def long(self) -> Self:
        """As int64 (PyTorch's ``x.long()``, for ids and targets; no gradient)."""
        return self.to(int64)

    def clone(self) -> Self:
        """A copy with its own memory; the gradient flows through it to this tensor, as
        PyTorch's ``clone`` (``detach`` cuts the graph instead)."""
        return apply(ops.Clone, self)

    def __float__(self) -> builtins.float:  # builtins.: in this class, float is the method below
        return float(self.item())

    def __int__(self) -> int:
        return int(self.item())
