"""ContainerStore: Burn's way, summing a whole Gradients container per micro-batch.

Kept beside the arena for study and comparison: every micro-batch allocates a fresh
container and every add allocates a fresh array (``new = old + g``: 12 bytes per fp32
element plus an allocation), where the arena writes in place. Unlike Burn, the
Accumulator built on it still normalizes the window (Burn's docs ask the user to
lower the learning rate by hand instead).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from minitorch_accum import kernels
from minitorch_accum.accum.gradient_store import (
    ForeignParameterError,
    StoreRecorder,
    check_touched,
    split_state_key,
)
from minitorch_accum.autodiff import Gradients, LeafSink, Tensor, run_backward
from minitorch_accum.kernels.arrays import Array  # a NumPy or a CuPy array: Any to mypy (CuPy has no types)
from minitorch_accum.nn import Module, Param

__all__ = ["ContainerStore", "GradientsAccumulator"]


class GradientsAccumulator:
    """Burn's accumulator: ``accumulate(model, grads)`` adds a container; ``grads()`` takes
    the sum and resets."""

    def __init__(self) -> None:
        self._sum: Gradients | None = None

    def accumulate(self, model: Module, grads: Gradients) -> None:
        """Add the gradients of ``model``'s parameters found in ``grads``."""
        self.add_params(model.parameters(), grads)

    def add_params(self, params: Sequence[Param], grads: Gradients) -> None:
        """Add the gradients of ``params`` found in ``grads``."""
        if self._sum is None:
            self._sum = Gradients()
        for param in params:
            grad = grads.get(param)
            if grad is None:
                continue
            previous = self._sum.get(param)
            self._sum.set(param, grad if previous is None else previous + grad)

    def grads(self) -> Gradients:
        """The summed gradients; the accumulator starts empty again."""
        out = self._sum if self._sum is not None else Gradients()
        self._sum = None
        return out

    def peek(self) -> Gradients | None:
        """The running sum without resetting (None before the first accumulate)."""
        return self._sum


class ContainerStore:
    """A window's gradient sums as a Burn-style Gradients container; each micro-batch's add of
    its container is one pass ``recorder`` hears of (it is no leaf sink)."""

    def __init__(self, named: Sequence[tuple[str, Param]]) -> None:
        self._names = {id(p): n for n, p in named}
        self._params = [p for _, p in named]
        #: told of each add of a container and each pass over the sums (observe/: the Accumulator's tracer)
        self.recorder: StoreRecorder | None = None
        self.summed = GradientsAccumulator()
        # a container is added only once backward finished, so a failed micro-batch leaves no trace
        self.poisoned = False

    @property
    def nbytes(self) -> int:
        """Bytes of the one container of gradients the window keeps."""
        return sum(int(p.data.nbytes) for p in self._params)

    def micro_batch(self, loss: Tensor, seed: Array | None, scale: float, sink: LeafSink | None = None) -> None:
        if sink is not None:
            raise TypeError("ContainerStore: Burn's containers are summed whole, not written leaf by leaf: no sink")
        grads = run_backward(loss, seed)
        assert grads is not None
        # a foreign parameter is found before anything is added: the window stays whole
        for leaf in grads:
            if isinstance(leaf, Param) and id(leaf) not in self._names:
                raise ForeignParameterError(leaf.shape, window_intact=True)
        check_touched(any(id(leaf) in self._names for leaf in grads))
        if scale != 1.0:
            for param, grad in grads.items():
                grads.set(param, grad * grad.dtype.type(scale))
        with self._adding(grads):
            self.summed.add_params(self._params, grads)

    def _adding(self, grads: Gradients) -> contextlib.AbstractContextManager[None]:
        """The add of ``grads`` as one pass the recorder times: a parameter's first gradient of the
        window is kept as it is (``container-store``), a later one added (``container-add``)."""
        if self.recorder is None:
            return contextlib.nullcontext()
        summed = self.summed.peek()
        return self.recorder.timed(
            [(self._names[id(p)], "container-add" if summed is not None and p in summed else "container-store", g)
             for p, g in grads.items() if id(p) in self._names], window_pass=False)

    def _pass(self, kernel: str, views: list[tuple[Param, Array]]) -> contextlib.AbstractContextManager[None]:
        """``kernel`` over the sums ``views`` as one pass the recorder times; nothing when none listens."""
        if self.recorder is None:
            return contextlib.nullcontext()
        return self.recorder.timed([(self._names[id(p)], kernel, g) for p, g in views], window_pass=True)

    def close(self) -> None:
        """Nothing to settle: the container holds the sums already."""

    def views(self) -> list[tuple[Param, Array]]:
        summed = self.summed.peek()
        if summed is None:
            return []
        return [(p, summed[p]) for p in self._params if p in summed]

    def finite_check(self) -> bool:
        """Containers carry no flag: one norm over the sums (inf and nan are sticky)."""
        views = self.views()
        if not views:
            return True
        with self._pass("finite_check", views):
            return math.isfinite(kernels.multi_l2_norm([g for _, g in views]))

    def scale_in_place(self, factor: float) -> None:
        for _, grad in self.views():
            grad *= grad.dtype.type(factor)

    def norm(self) -> float:
        arrays = [g for _, g in self.views()]
        return kernels.multi_l2_norm(arrays) if arrays else 0.0

    def reset(self) -> None:
        self.summed.grads()

    def state_meta(self) -> dict[str, Any]:
        return {}

    def state_arrays(self) -> dict[str, np.ndarray]:
        """Each summed gradient as a host array, keyed ``grad/<parameter name>``."""
        return {f"grad/{self._names[id(p)]}": np.array(p.backend.to_host(g), copy=True) for p, g in self.views()}

    def load(self, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
        by_name = {n: p for p, n in ((p, self._names[id(p)]) for p in self._params)}
        partial = Gradients()
        for key, value in arrays.items():
            _, name = split_state_key(key, ("grad",))
            if name not in by_name:
                raise ValueError(f"accumulator state names unknown parameter {name!r}")
            param = by_name[name]
            partial.set(param, param.backend.asarray(value))
        self.summed = GradientsAccumulator()
        if len(partial):
            self.summed.add_params(self._params, partial)
