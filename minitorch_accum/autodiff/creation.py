"""Making tensors: from data (copied, or shared with ``from_numpy``), filled, ranges, random.

Dtypes follow PyTorch: an array (NumPy, CuPy, a Tensor, a NumPy scalar) keeps its dtype,
float64 included, as ``torch.tensor(np_array)`` does; Python numbers and lists, float fills
and ``empty`` get the default float dtype (``set_default_dtype``, float32 unless changed),
integer fills and ranges int64, bool fills bool. A ``dtype`` argument always wins.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from minitorch_accum.autodiff.movement import shape_arguments
from minitorch_accum.autodiff.tensor import Tensor
from minitorch_accum.backend import (
    TENSOR_DTYPES,
    DeviceLike,
    backend_for,
    default_generator,
    get_default_dtype,
    int64,
    resolve_tensor_dtype,
)

__all__ = [
    "arange",
    "empty",
    "from_numpy",
    "full",
    "full_like",
    "ones",
    "ones_like",
    "rand",
    "randn",
    "tensor",
    "zeros",
    "zeros_like",
]


def tensor(data: Any, dtype: Any = None, device: DeviceLike | None = "cpu",
           requires_grad: bool = False) -> Tensor:
    """A tensor holding a *copy* of ``data`` (nested lists, a NumPy/CuPy array, a number or a
    Tensor), as ``torch.tensor`` copies: changing ``data`` afterwards changes nothing here.

    Without ``dtype``, an array keeps its dtype, as ``torch.tensor`` keeps a NumPy array's:
    a float64 array gives a float64 tensor, float32 a float32 one, integer and bool arrays
    stay what they are (ids, targets, masks; they cannot require grad). Python numbers and
    (nested) lists have no dtype of their own and get the default float dtype
    (``mta.get_default_dtype()``, float32 unless changed), as ``torch.tensor([1.0])`` does.
    To share an array's memory instead of copying it, use ``from_numpy``.
    """
    backend = backend_for(device)
    if isinstance(data, Tensor):
        data = data.data
    if dtype is None:
        own = getattr(data, "dtype", None)  # (not ``or``: a NumPy dtype's truth is its number of fields)
        dtype = get_default_dtype() if own is None else own
    array = backend.asarray(data, dtype=resolve_tensor_dtype(dtype), copy=True)
    return Tensor(array, requires_grad=requires_grad, _backend=backend)


def from_numpy(array: np.ndarray, requires_grad: bool = False) -> Tensor:
    """A CPU tensor that *shares* memory with a NumPy ``array`` and keeps its dtype, as
    ``torch.from_numpy``: writing into either changes both. For a copy, use ``tensor``."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"from_numpy expects a numpy.ndarray, got {type(array).__name__}")
    if array.dtype.name not in TENSOR_DTYPES:
        raise TypeError(f"from_numpy: unsupported dtype {array.dtype.name}: expected one of {', '.join(TENSOR_DTYPES)}")
    return Tensor(array, requires_grad=requires_grad, _backend=backend_for("cpu"))


def _filled(shape: tuple[int, ...], value: Any, dtype: Any, device: DeviceLike | None,
            requires_grad: bool) -> Tensor:
    backend = backend_for(device)
    array = backend.xp.full(shape, value, dtype=resolve_tensor_dtype(dtype))
    return Tensor(array, requires_grad, _backend=backend)


def zeros(*shape: int | Sequence[int], dtype: Any = None, device: DeviceLike | None = "cpu",
          requires_grad: bool = False) -> Tensor:
    """A tensor of zeros (the default float dtype unless ``dtype`` says otherwise, ints and bool included)."""
    return _filled(shape_arguments(shape), 0, dtype, device, requires_grad)


def ones(*shape: int | Sequence[int], dtype: Any = None, device: DeviceLike | None = "cpu",
         requires_grad: bool = False) -> Tensor:
    """A tensor of ones (the default float dtype unless ``dtype`` says otherwise, ints and bool included)."""
    return _filled(shape_arguments(shape), 1, dtype, device, requires_grad)


def empty(*shape: int | Sequence[int], dtype: Any = None, device: DeviceLike | None = "cpu",
          requires_grad: bool = False) -> Tensor:
    """A tensor whose elements are not set (whatever the memory held), as ``torch.empty``: for
    a buffer every element of which is written before it is read. For zeros, use ``zeros``."""
    backend = backend_for(device)
    array = backend.xp.empty(shape_arguments(shape), dtype=resolve_tensor_dtype(dtype))
    return Tensor(array, requires_grad, _backend=backend)


def _fill_dtype(value: Any) -> Any:
    """PyTorch's dtype for a fill value: bool, int64 for ints, the default float dtype otherwise."""
    if isinstance(value, bool | np.bool_):
        return np.bool_
    if isinstance(value, int | np.integer):
        return int64
    return None


def full(shape: int | Sequence[int], fill_value: Any, dtype: Any = None, device: DeviceLike | None = "cpu",
         requires_grad: bool = False) -> Tensor:
    """A tensor filled with ``fill_value``; its dtype follows the value (bool, int64, float) unless given."""
    size = (shape,) if isinstance(shape, int) else tuple(shape)
    return _filled(size, fill_value, _fill_dtype(fill_value) if dtype is None else dtype, device, requires_grad)


def zeros_like(x: Tensor, dtype: Any = None, requires_grad: bool = False) -> Tensor:
    return zeros(x.shape, dtype=x.dtype if dtype is None else dtype, device=x.device, requires_grad=requires_grad)


def ones_like(x: Tensor, dtype: Any = None, requires_grad: bool = False) -> Tensor:
    return ones(x.shape, dtype=x.dtype if dtype is None else dtype, device=x.device, requires_grad=requires_grad)


def full_like(x: Tensor, fill_value: Any, dtype: Any = None, requires_grad: bool = False) -> Tensor:
    return full(x.shape, fill_value, dtype=x.dtype if dtype is None else dtype, device=x.device,
                requires_grad=requires_grad)


def arange(start: float, end: float | None = None, step: float = 1, *, dtype: Any = None,
           device: DeviceLike | None = "cpu", requires_grad: bool = False) -> Tensor:
    """Values from ``start`` (0 with one argument) up to, not including, ``end``, ``step`` apart:
    int64 when all three are ints, the default float dtype otherwise (as PyTorch)."""
    if end is None:
        start, end = 0, start
    if step == 0:
        raise ValueError("arange: step must not be 0")
    if dtype is None:
        integral = all(isinstance(v, int | np.integer) and not isinstance(v, bool) for v in (start, end, step))
        dtype = int64 if integral else None
    backend = backend_for(device)
    target = resolve_tensor_dtype(dtype)
    # computed in float64 (or int64) on the host, then cast, so every dtype sees the same values
    values = np.arange(start, end, step, dtype=np.int64 if target.kind in "iu" else np.float64)
    return Tensor(backend.asarray(values.astype(target)), requires_grad, _backend=backend)


def randn(*shape: int | Sequence[int], dtype: Any = None, device: DeviceLike | None = "cpu",
          requires_grad: bool = False, rng: np.random.Generator | None = None) -> Tensor:
    """Standard normal samples from the seeded default generator (or ``rng``)."""
    values = (rng or default_generator()).standard_normal(shape_arguments(shape))
    return _from_host(values, dtype, device, requires_grad)


def rand(*shape: int | Sequence[int], dtype: Any = None, device: DeviceLike | None = "cpu",
         requires_grad: bool = False, rng: np.random.Generator | None = None) -> Tensor:
    """Uniform samples in [0, 1) from the seeded default generator (or ``rng``)."""
    values = (rng or default_generator()).random(shape_arguments(shape))
    return _from_host(values, dtype, device, requires_grad)


def _from_host(values: np.ndarray, dtype: Any, device: DeviceLike | None, requires_grad: bool) -> Tensor:
    """A fresh host array cast and moved (it is nobody else's, so no defensive copy)."""
    backend = backend_for(device)
    array = backend.asarray(values.astype(resolve_tensor_dtype(dtype), copy=False))
    return Tensor(array, requires_grad, _backend=backend)
