"""Parameter initializers. Values are drawn on the host from a seeded generator, in
float64, then cast and moved, so a seed gives the same model on every device and dtype.

Two faces: ``uniform(shape, bound)``, ``normal``, ``constant`` and ``kaiming_uniform`` make a
new Param (``dtype=None`` is the default dtype; ``layout`` is the Param's, see ``Param``);
PyTorch's in-place ``xavier_uniform_``, ``zeros_``, ``normal_``, ... overwrite a tensor that
exists, as ``model.apply(init)`` uses them (below)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy import special

from minitorch_accum.autodiff import Tensor
from minitorch_accum.backend import DeviceLike, backend_for, default_generator, is_float_dtype, resolve_dtype
from minitorch_accum.nn.module import Param

__all__ = ["calculate_gain", "constant", "constant_", "kaiming_normal_", "kaiming_uniform", "kaiming_uniform_",
           "normal", "normal_", "ones_", "trunc_normal_", "uniform", "uniform_", "xavier_normal_",
           "xavier_uniform_", "zeros_"]


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


# ------------------------------------------------------------------ PyTorch's in-place initializers
# Each overwrites ``tensor``'s elements in place (its array keeps its identity, so a module holding
# the Param sees the new values) with values drawn in float64 from ``generator`` (a NumPy generator,
# what ``mta.manual_seed`` returns) or the library's seeded default, and returns ``tensor``.

#: the gain ``calculate_gain`` gives each nonlinearity (leaky_relu's depends on its slope)
_GAINS = {"linear": 1.0, "identity": 1.0, "sigmoid": 1.0, "conv1d": 1.0, "conv2d": 1.0, "conv3d": 1.0,
          "tanh": 5.0 / 3.0, "relu": math.sqrt(2.0), "selu": 3.0 / 4.0}


def calculate_gain(nonlinearity: str, param: float | None = None) -> float:
    """PyTorch's recommended gain for a nonlinearity (``leaky_relu``'s ``param`` is its slope, 0.01
    by default); xavier and kaiming initializers scale by it."""
    if nonlinearity == "leaky_relu":
        slope = 0.01 if param is None else param
        if isinstance(slope, bool) or not isinstance(slope, int | float):
            raise ValueError(f"calculate_gain: leaky_relu's slope must be a number, got {slope!r}")
        return math.sqrt(2.0 / (1.0 + slope**2))
    if nonlinearity not in _GAINS:
        raise ValueError(f"calculate_gain: unknown nonlinearity {nonlinearity!r}; known: leaky_relu, "
                         f"{', '.join(_GAINS)}")
    return _GAINS[nonlinearity]


def _checked(op: str, tensor: Any) -> Tensor:
    if not isinstance(tensor, Tensor):
        raise TypeError(f"nn.init.{op}: expects a tensor (a Param such as layer.weight), got {type(tensor).__name__}")
    if not is_float_dtype(tensor.dtype):
        raise TypeError(f"nn.init.{op}: expects a float tensor, got {tensor.dtype.name}")
    return tensor


def _overwrite(tensor: Tensor, values: np.ndarray) -> Tensor:
    tensor.data[...] = tensor.backend.asarray(values.astype(tensor.dtype))
    tensor.bump_version()  # a graph that saved the tensor before can no longer be differentiated
    return tensor


def _fans(op: str, tensor: Tensor) -> tuple[int, int]:
    """(fan_in, fan_out) of a weight, read from its layout: a Linear's (in, out) weight (layout
    ``"in_out"``) is the transpose of PyTorch's; an Embedding's table, and a Param without a
    layout, are read as PyTorch reads a weight, (out, in, *receptive field)."""
    shape = tensor.shape
    if len(shape) < 2:
        raise ValueError(f"nn.init.{op}: fan in and fan out need a tensor of at least 2 axes, got shape {shape}")
    if getattr(tensor, "layout", None) == "in_out":
        return shape[0], shape[1]
    receptive = math.prod(shape[2:])
    return shape[1] * receptive, shape[0] * receptive


def _generator(generator: np.random.Generator | None) -> np.random.Generator:
    return default_generator() if generator is None else generator


def uniform_(tensor: Tensor, a: float = 0.0, b: float = 1.0, generator: np.random.Generator | None = None) -> Tensor:
    """U(a, b) in place."""
    _checked("uniform_", tensor)
    return _overwrite(tensor, _generator(generator).uniform(a, b, size=tensor.shape))


def normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0,
            generator: np.random.Generator | None = None) -> Tensor:
    """N(mean, std^2) in place."""
    _checked("normal_", tensor)
    return _overwrite(tensor, _generator(generator).normal(mean, std, size=tensor.shape))


def trunc_normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, a: float = -2.0, b: float = 2.0,
                  generator: np.random.Generator | None = None) -> Tensor:
    """N(mean, std^2) restricted to [a, b] (bounds in the tensor's units, as PyTorch's), in place:
    uniform draws between the normal CDF at a and at b, through the inverse CDF."""
    _checked("trunc_normal_", tensor)
    if not a < b:
        raise ValueError(f"nn.init.trunc_normal_: needs a < b, got a={a}, b={b}")
    low, high = (special.ndtr((bound - mean) / std) for bound in (a, b))
    drawn = special.ndtri(_generator(generator).uniform(low, high, size=tensor.shape))
    return _overwrite(tensor, np.clip(mean + std * drawn, a, b))


def _fill(op: str, tensor: Tensor, value: float) -> Tensor:
    _checked(op, tensor)
    return _overwrite(tensor, np.full(tensor.shape, value, dtype=np.float64))


def constant_(tensor: Tensor, val: float) -> Tensor:
    return _fill("constant_", tensor, val)


def zeros_(tensor: Tensor) -> Tensor:
    return _fill("zeros_", tensor, 0.0)


def ones_(tensor: Tensor) -> Tensor:
    return _fill("ones_", tensor, 1.0)


def xavier_uniform_(tensor: Tensor, gain: float = 1.0, generator: np.random.Generator | None = None) -> Tensor:
    """Glorot's U(-bound, bound), bound = gain * sqrt(6 / (fan_in + fan_out)), in place."""
    fan_in, fan_out = _fans("xavier_uniform_", _checked("xavier_uniform_", tensor))
    bound = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return _overwrite(tensor, _generator(generator).uniform(-bound, bound, size=tensor.shape))


def xavier_normal_(tensor: Tensor, gain: float = 1.0, generator: np.random.Generator | None = None) -> Tensor:
    """Glorot's N(0, std^2), std = gain * sqrt(2 / (fan_in + fan_out)), in place."""
    fan_in, fan_out = _fans("xavier_normal_", _checked("xavier_normal_", tensor))
    std = gain * math.sqrt(2.0 / (fan_in + fan_out))
    return _overwrite(tensor, _generator(generator).normal(0.0, std, size=tensor.shape))


def _kaiming_std(op: str, tensor: Tensor, a: float, mode: str, nonlinearity: str) -> float:
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"nn.init.{op}: mode must be 'fan_in' or 'fan_out', got {mode!r}")
    fan_in, fan_out = _fans(op, _checked(op, tensor))
    fan = fan_in if mode == "fan_in" else fan_out
    return calculate_gain(nonlinearity, a) / math.sqrt(max(fan, 1))


def kaiming_uniform_(tensor: Tensor, a: float = 0.0, mode: str = "fan_in", nonlinearity: str = "leaky_relu",
                     generator: np.random.Generator | None = None) -> Tensor:
    """He's U(-bound, bound), bound = sqrt(3) * gain / sqrt(fan), in place (PyTorch's defaults:
    leaky_relu with slope ``a``, the fan in)."""
    bound = math.sqrt(3.0) * _kaiming_std("kaiming_uniform_", tensor, a, mode, nonlinearity)
    return _overwrite(tensor, _generator(generator).uniform(-bound, bound, size=tensor.shape))


def kaiming_normal_(tensor: Tensor, a: float = 0.0, mode: str = "fan_in", nonlinearity: str = "leaky_relu",
                    generator: np.random.Generator | None = None) -> Tensor:
    """He's N(0, std^2), std = gain / sqrt(fan), in place."""
    std = _kaiming_std("kaiming_normal_", tensor, a, mode, nonlinearity)
    return _overwrite(tensor, _generator(generator).normal(0.0, std, size=tensor.shape))
