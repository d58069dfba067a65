"""The arena's writes as an observer sees them: wrappers of a store that the engine hands each leaf
gradient to instead of the store itself. The store's own write stays the idea alone (copy on the
window's first write, add after) and a micro-batch that nothing watches pays nothing for watching.

- ``TracedWrites`` times each write (the device synchronized) and tells the recorder the kernel
  that wrote, by the name the store's write returns: the kernel it ran, so the two cannot drift;
- ``UncountedWrites`` runs each write under ``not_counted()``: the scratch a kernel path allocates
  (the NumPy reference's ``s * g``, a GEMM factor made contiguous) is no activation of the open
  probe (see ``observe/memory.py``).

``watched_writes(store, recorder)`` chooses, once per micro-batch.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from minitorch_accum.kernels import bytes_moved
from minitorch_accum.observe.memory import memory_watched, not_counted
from minitorch_accum.observe.trace_events import KernelRecorder

__all__ = ["TracedWrites", "UncountedWrites", "watched_writes"]


class _Wrapper:
    """A leaf sink that passes everything to ``inner`` (a store, or another wrapper of one)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.fuses_gemm: bool = inner.fuses_gemm

    @property
    def leaf_done(self) -> Any:
        # read at every backward: data parallelism sets it on the store for the window's last micro-batch
        return self.inner.leaf_done

    def accepts(self, leaf: Any) -> bool:
        return self.inner.accepts(leaf)


class TracedWrites(_Wrapper):
    """Each write of ``store`` timed and told to ``recorder``: parameter, kernel, elements, bytes."""

    def __init__(self, store: Any, recorder: KernelRecorder) -> None:
        super().__init__(store)
        self.recorder = recorder
        self._arena = store.arena
        self._names = {id(p): n for n, p in zip(store.arena.names, store.arena.params, strict=True)}

    def add(self, leaf: Any, grad: Any) -> str:
        started = time.perf_counter()
        kernel = self.inner.add(leaf, grad)
        leaf.backend.synchronize()
        view = self._arena.view(leaf)
        self.recorder(self._names[id(leaf)], kernel, view.size,
                      bytes_moved(kernel, view.size, view.dtype.itemsize, grad.dtype.itemsize),
                      time.perf_counter() - started, materialized=True, window_pass=False)
        return kernel

    def add_product(self, leaf: Any, a: Any, b: Any) -> str:
        first = not self.inner.holds(leaf)
        started = time.perf_counter()
        kernel = self.inner.add_product(leaf, a, b)
        leaf.backend.synchronize()
        view = self._arena.view(leaf)
        factor_bytes = (a.size + b.size) * np.dtype(a.dtype).itemsize
        traffic = 2 * factor_bytes + view.nbytes * (1 if first else 2)  # the GEMM, then the factors' norms
        self.recorder(self._names[id(leaf)], kernel, view.size, traffic, time.perf_counter() - started,
                      materialized=kernel == "gemm-fallback", window_pass=False)
        return kernel


class UncountedWrites(_Wrapper):
    """Each write of ``inner`` under ``not_counted()``: left out of every open probe and watch."""

    def add(self, leaf: Any, grad: Any) -> str:
        with not_counted():
            return self.inner.add(leaf, grad)

    def add_product(self, leaf: Any, a: Any, b: Any) -> str:
        with not_counted():
            return self.inner.add_product(leaf, a, b)


def watched_writes(store: Any, recorder: KernelRecorder | None) -> Any:
    """What the engine should hand one micro-batch's leaf gradients: ``store`` wrapped for
    ``recorder`` (when tracing) and under ``not_counted()`` (while a memory probe or watch is
    open); None when nothing watches, or when the store is no leaf sink (Burn's containers,
    whose adds reach the recorder as one pass), so the store itself takes them."""
    if not hasattr(store, "accepts"):
        return None
    sink = store if recorder is None else TracedWrites(store, recorder)
    if memory_watched():
        sink = UncountedWrites(sink)
    return None if sink is store else sink
