"""What differs between a host (NumPy) and a CUDA (CuPy) run of the kernel benchmark:
aligned arrays, bfloat16 copies, synchronization, the sample timer, and PyTorch views of
the very same memory (``torch.from_numpy`` / DLPack)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from benchmarks.harness.timing import Timer
from benchmarks.harness.torch_import import ImportedTorch
from minitorch_accum import bfloat16

__all__ = ["DeviceArrays", "torch_mixed_path"]


def torch_mixed_path(torch: Any, device: str) -> str:
    """Whether this PyTorch accepts a bf16 gradient list added into fp32 accumulators by foreach.

    Its foreach kernels need one dtype per list pair and fall back (or refuse) on
    mixed dtypes; a user whose foreach call fails writes the per-tensor loop.
    """
    accs = [torch.zeros(8, dtype=torch.float32, device=device)]
    gs = [torch.ones(8, dtype=torch.bfloat16, device=device)]
    try:
        torch._foreach_add_(accs, gs, alpha=0.5)
    except (RuntimeError, TypeError):
        return "per-tensor"
    return "foreach" if bool((accs[0] == 0.5).all()) else "per-tensor"


class DeviceArrays:
    """Arrays, timing and torch wrapping on one device; ``xp`` is NumPy or CuPy."""

    def __init__(self, device: str, torch: ImportedTorch | None) -> None:
        self.device = device
        self.torch = torch
        # what PyTorch's mixed bf16 -> fp32 add does here ("" without torch)
        self.mixed_path = "" if torch is None else torch_mixed_path(torch.module, device)
        if device == "cuda":
            import cupy

            self.xp: Any = cupy
        else:
            self.xp = np

    @property
    def on_host(self) -> bool:
        return self.xp is np

    # arrays -----------------------------------------------------------
    def empty(self, n: int, dtype: Any) -> Any:
        """A flat array whose data starts on a 64-byte boundary (as GradArena's buffers do)."""
        dtype = np.dtype(dtype)
        if self.on_host:
            raw = np.empty(n * dtype.itemsize + 64, dtype=np.uint8)
            start = (-raw.ctypes.data) % 64
            return raw[start : start + n * dtype.itemsize].view(dtype)
        return self.xp.empty(n, dtype=dtype)  # CUDA allocations are 256-byte aligned

    def _fill(self, out: Any, host: np.ndarray) -> Any:
        if self.on_host:
            out[...] = host
        else:
            out.set(host)
        return out

    def random(self, n: int, seed: int) -> Any:
        return self._fill(self.empty(n, np.float32), np.random.default_rng(seed).random(n, dtype=np.float32))

    def address(self, x: Any) -> int:
        return int(x.ctypes.data) if self.on_host else int(x.data.ptr)

    def to_bfloat16(self, x: Any) -> Any | None:
        """x rounded to bfloat16 (ml_dtypes), or None where the array library has no bfloat16."""
        try:
            out = self.empty(x.size, bfloat16)
        except Exception:  # CuPy before bfloat16 support raises its own error types
            return None
        host = np.asarray(x if self.on_host else x.get()).astype(bfloat16)
        return self._fill(out, host.reshape(out.shape))

    def synchronize(self) -> None:
        if not self.on_host:
            self.xp.cuda.get_current_stream().synchronize()

    def timer(self) -> Timer | None:
        """CUDA events around a sample on a GPU (wall clock would time the launch, not the kernel)."""
        if self.on_host:
            return None
        cupy = self.xp

        def cuda_events(fn: Callable[[], Any]) -> float:
            start, end = cupy.cuda.Event(), cupy.cuda.Event()
            start.record()
            fn()
            end.record()
            end.synchronize()
            return float(cupy.cuda.get_elapsed_time(start, end)) / 1e3

        return cuda_events

    def free_cached(self) -> None:
        """Give the case's memory back before the next, larger one is allocated (CuPy caches it)."""
        if not self.on_host:
            self.xp.get_default_memory_pool().free_all_blocks()

    # torch views of the same memory -------------------------------------
    def as_torch(self, x: Any) -> Any:
        torch = self.torch.module  # type: ignore[union-attr]
        if x.dtype == bfloat16:
            # neither torch.from_numpy nor DLPack knows ml_dtypes' bfloat16: wrap the bits
            return self.as_torch(x.view(np.int16)).view(torch.bfloat16)
        if self.on_host:
            return torch.from_numpy(x)
        return torch.from_dlpack(x)
