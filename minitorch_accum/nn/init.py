"""Parameter initializers. Values are drawn on the host from a seeded generator, in
float64, then cast and moved, so a seed gives the same model on every device and dtype.
``dtype=None`` is the default dtype (``mta.get_default_dtype()``); ``layout`` is the
Param's (see ``Param``)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from minitorch_accum.backend import DeviceLike, backend_for, default_generator, resolve_dtype
from minitorch_accum.nn.module import Param

__all__ = ["constant", "kaiming_uniform", "normal", "uniform"]


def _param(values: np.ndarray, dtype: Any, device: DeviceLike | None, layout: str | None = None) -> Param:
    return Param(backend_for(device).asarray(values.astype(resolve_dtype(dtype))), layout=layout)


def uniform(shape: tuple[int, ...], bound: float, *, dtype: Any = None,
            device: DeviceLike | None = "cpu", rng: np.random.Generator | None = None,
            layout: str | None = None) -> Param:
    """U(-bound, bound)."""
    values = (rng or default_generator()).uniform(-bound, bound, size=shape)
    return _param(values, dtype, device, layout)


def kaiming_uniform(shape: tuple[int, ...], fan_in: int, **kwargs: Any) -> Param:
    """U(-1/sqrt(fan_in), 1/sqrt(fan_in)): Burn's and PyTorch's default for Linear."""
    return uniform(shape, 1.0 / math.sqrt(max(fan_in, 1)), **kwargs)


def normal(shape: tuple[int, ...], std: float = 1.0, *, dtype: Any = None,
           device: DeviceLike | None = "cpu", rng: np.random.Generator | None = None,
           layout: str | None = None) -> Param:
    """N(0, std^2)."""
    values = (rng or default_generator()).normal(0.0, std, size=shape)
    return _param(values, dtype, device, layout)


def constant(shape: tuple[int, ...], value: float, *, dtype: Any = None,
             device: DeviceLike | None = "cpu") -> Param:
    return _param(np.full(shape, value, dtype=np.float64), dtype, device)
