"""Memory accounting measured by the allocator, not estimated.

On the CPU, NumPy reports every array buffer to ``tracemalloc``; on a GPU a CuPy
memory hook counts the bytes the memory pool hands out and takes back. The peak
*above* what was already allocated when measuring started is what a micro-batch's
forward and backward needed: its activations and temporary gradients. Parameters,
the gradient arena and optimizer state already exist at that point and are counted
separately, from their arrays.
"""

from __future__ import annotations

import tracemalloc
from dataclasses import asdict, dataclass
from typing import Any

from minitorch_accum.backend import Device, DeviceLike, parse_device

__all__ = ["MemoryReport", "PeakMemory", "array_bytes"]


class PeakMemory:
    """Context manager: ``peak_bytes`` = highest allocation above the level at entry."""

    def __init__(self, device: DeviceLike = "cpu") -> None:
        self.device: Device = parse_device(device)
        self.peak_bytes = 0
        self._started_tracing = False
        self._hook: Any = None

    def __enter__(self) -> PeakMemory:
        if self.device.kind == "cpu":
            if not tracemalloc.is_tracing():
                tracemalloc.start()
                self._started_tracing = True
            self._baseline = tracemalloc.get_traced_memory()[0]
            tracemalloc.reset_peak()
        else:
            self._hook = _cupy_peak_hook()
            self._hook.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.device.kind == "cpu":
            _, peak = tracemalloc.get_traced_memory()
            self.peak_bytes = max(0, peak - self._baseline)
            if self._started_tracing:
                tracemalloc.stop()
        else:
            self._hook.__exit__(*exc)
            self.peak_bytes = self._hook.peak


def _cupy_peak_hook() -> Any:
    from cupy.cuda import memory_hook

    class _PeakHook(memory_hook.MemoryHook):
        name = "minitorch_accum_peak"

        def __init__(self) -> None:
            self.current = 0
            self.peak = 0

        def malloc_postprocess(self, device_id: int, size: int, mem_size: int, mem_ptr: int, pmem_id: int) -> None:
            self.current += mem_size
            self.peak = max(self.peak, self.current)

        def free_postprocess(self, device_id: int, mem_size: int, mem_ptr: int, pmem_id: int) -> None:
            self.current -= mem_size

    return _PeakHook()


def array_bytes(arrays: Any) -> int:
    """Total bytes of the arrays in a (nested) dict/list of arrays."""
    if hasattr(arrays, "nbytes") and hasattr(arrays, "shape"):
        return int(arrays.nbytes)
    if isinstance(arrays, dict):
        return sum(array_bytes(v) for v in arrays.values())
    if isinstance(arrays, list | tuple):
        return sum(array_bytes(v) for v in arrays)
    return 0


@dataclass(frozen=True)
class MemoryReport:
    """Bytes by what they hold, for one micro-batch."""

    parameters: int
    arena: int
    optimizer_state: int
    activations: int  # peak above the persistent state during forward + backward

    @property
    def total(self) -> int:
        return self.parameters + self.arena + self.optimizer_state + self.activations

    def as_dict(self) -> dict[str, int]:
        return {**asdict(self), "total": self.total}
