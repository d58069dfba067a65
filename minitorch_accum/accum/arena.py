"""GradArena: one persistent, aligned flat buffer per accumulation dtype, holding the
gradient of every parameter of a model.

Each parameter's gradient is a view into the buffer at an offset aligned to 64
bytes, so every view starts on a cache line and the kernels' 16-byte vector loads
apply to each of them. One flat buffer means one kernel launch, one norm, one
optimizer launch and one checkpoint tensor per window; the arena is allocated once
and reused for every window and epoch.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import numpy.typing as npt

from minitorch_accum.backend import Backend, resolve_dtype
from minitorch_accum.kernels.arrays import Array  # a NumPy or a CuPy array: Any to mypy (CuPy has no types)
from minitorch_accum.nn import Param

__all__ = ["ALIGNMENT_BYTES", "ARENA_DTYPES", "GradArena", "accumulation_dtype"]

ALIGNMENT_BYTES = 64
#: the dtypes an arena may be asked for
ARENA_DTYPES = ("float32", "float64", "bfloat16")
_BFLOAT16 = resolve_dtype("bfloat16")


def accumulation_dtype(param_dtype: np.dtype, requested: np.dtype) -> np.dtype:
    """Where a parameter's gradient accumulates: float64 when either side is float64, bfloat16
    when asked for (each sum rounded back to bfloat16 by the kernels), float32 otherwise (16-bit
    gradients are otherwise summed in float32)."""
    if param_dtype == np.float64 or requested == np.float64:
        return np.dtype(np.float64)
    if requested == _BFLOAT16:
        return _BFLOAT16
    return np.dtype(np.float32)


class _Slot:
    __slots__ = ("dtype", "offset", "shape", "size")

    def __init__(self, dtype: np.dtype, offset: int, shape: tuple[int, ...], size: int) -> None:
        self.dtype, self.offset, self.shape, self.size = dtype, offset, shape, size


class GradArena:
    """Flat gradient buffers for ``params`` (in order), with ``view(param)`` into them."""

    #: buffers allocated by every arena in this process (tests assert it does not grow)
    allocations = 0

    def __init__(self, params: Iterable[tuple[str, Param]], accum_dtype: npt.DTypeLike = "float32",
                 shards: int = 1) -> None:
        """``shards``: pad each buffer to a multiple of ``shards`` cache lines, so that it splits
        into that many equal, 64-byte aligned pieces (one per rank for a reduce-scatter)."""
        if isinstance(shards, bool) or not isinstance(shards, int) or shards < 1:
            raise ValueError(f"GradArena: shards must be a positive int, got {shards!r}")
        requested = resolve_dtype(accum_dtype)
        if requested.name not in ARENA_DTYPES:
            raise TypeError(f"GradArena: accum_dtype must be float32, float64 or bfloat16, got {requested.name}")
        self.accum_dtype = requested
        self.names: list[str] = []
        self.params: list[Param] = []
        self._slots: dict[int, _Slot] = {}
        sizes: dict[np.dtype, int] = {}
        backend: Backend | None = None
        for name, param in params:
            if backend is None:
                backend = param.backend
            elif param.device != backend.device:
                raise ValueError(f"GradArena: parameter {name} is on {param.device}, others on {backend.device}")
            if requested == _BFLOAT16 and param.dtype == np.float64:
                raise TypeError(f"GradArena: a bfloat16 arena cannot hold the gradient of the float64 parameter "
                                f"{name}; accumulate a float64 model in float64")
            dtype = accumulation_dtype(param.dtype, requested)
            per_line = ALIGNMENT_BYTES // dtype.itemsize
            offset = -(-sizes.get(dtype, 0) // per_line) * per_line
            self._slots[id(param)] = _Slot(dtype, offset, param.shape, param.size)
            sizes[dtype] = offset + param.size
            self.names.append(name)
            self.params.append(param)
        if backend is None:
            raise ValueError("GradArena: the model has no parameters")
        if requested == _BFLOAT16 and backend.xp is not np:
            raise TypeError(f"GradArena: a bfloat16 arena needs NumPy arrays (CuPy has no bfloat16 dtype); the "
                            f"model is on {backend.device}")
        self.backend = backend
        self.shards = shards
        for dtype, n in sizes.items():
            multiple = shards * (ALIGNMENT_BYTES // dtype.itemsize)
            sizes[dtype] = -(-n // multiple) * multiple
        self.buffers: dict[np.dtype, Array] = {dtype: self._allocate(dtype, n) for dtype, n in sizes.items()}
        self._views = {key: self._make_view(slot) for key, slot in self._slots.items()}

    def _allocate(self, dtype: np.dtype, count: int) -> Array:
        xp = self.backend.xp
        GradArena.allocations += 1
        if xp is np:
            # over-allocate and slice so the buffer itself starts on a 64-byte boundary
            # (zeroed once, so the padding between views never holds garbage)
            raw = np.zeros(count * dtype.itemsize + ALIGNMENT_BYTES, dtype=np.uint8)
            start = (-raw.ctypes.data) % ALIGNMENT_BYTES
            return raw[start:start + count * dtype.itemsize].view(dtype)
        with self.backend.device_scope():
            return xp.zeros(count, dtype=dtype)  # CUDA allocations are 256-byte aligned

    def _make_view(self, slot: _Slot) -> Array:
        return self.buffers[slot.dtype][slot.offset:slot.offset + slot.size].reshape(slot.shape)

    # ------------------------------------------------------------ access
    @property
    def buffer(self) -> Array:
        """The flat buffer, when every gradient accumulates in one dtype (the usual case)."""
        if len(self.buffers) != 1:
            raise ValueError(
                f"GradArena: this arena holds {len(self.buffers)} buffers "
                f"({', '.join(d.name for d in self.buffers)}); use arena.buffers[dtype]"
            )
        return next(iter(self.buffers.values()))

    def view(self, param: Param) -> Array:
        """The gradient of ``param``: a view into the flat buffer, in the parameter's shape."""
        try:
            return self._views[id(param)]
        except KeyError:
            raise KeyError(f"GradArena: parameter of shape {param.shape} is not part of this arena") from None

    def span(self, param: Param) -> tuple[np.dtype, int, int]:
        """(buffer dtype, first element, element count) of ``param``'s gradient in its flat buffer."""
        slot = self._slots[id(param)]
        return slot.dtype, slot.offset, slot.size

    def __contains__(self, param: object) -> bool:
        return id(param) in self._views

    @property
    def nbytes(self) -> int:
        return sum(int(b.nbytes) for b in self.buffers.values())

    def like(self) -> GradArena:
        """A second arena with the same layout (for compensation terms)."""
        twin = object.__new__(GradArena)
        twin.accum_dtype = self.accum_dtype
        twin.names, twin.params, twin._slots = self.names, self.params, self._slots
        twin.backend = self.backend
        twin.shards = self.shards
        twin.buffers = {dtype: twin._allocate(dtype, int(buf.size)) for dtype, buf in self.buffers.items()}
        twin._views = {key: twin._make_view(slot) for key, slot in self._slots.items()}
        return twin

    # -------------------------------------------------------- checkpoints
    def state_arrays(self) -> dict[str, np.ndarray]:
        """Each flat buffer as a host array, keyed by dtype name (one tensor per buffer)."""
        return {dtype.name: np.array(self.backend.to_host(buf), copy=True) for dtype, buf in self.buffers.items()}

    def load_state_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        """Copy saved buffers back in place (the views stay valid); sizes must match."""
        for dtype, buf in self.buffers.items():
            saved = arrays.get(dtype.name)
            if saved is None or saved.shape != tuple(buf.shape) or saved.dtype != dtype:
                got = None if saved is None else f"{saved.dtype.name}{list(saved.shape)}"
                raise ValueError(f"GradArena: saved buffer for {dtype.name} does not fit: expected "
                                 f"{dtype.name}{list(buf.shape)}, got {got}")
        for dtype, buf in self.buffers.items():
            buf[...] = self.backend.asarray(arrays[dtype.name])

    def __repr__(self) -> str:
        parts = ", ".join(f"{d.name}[{b.size}]" for d, b in self.buffers.items())
        return f"GradArena({len(self.params)} params, {parts}, {self.nbytes} bytes)"
