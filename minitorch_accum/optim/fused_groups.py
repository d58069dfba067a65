"""Grouping parameters so each group is one multi-tensor kernel launch.

A fused step needs parameter, gradient and state arrays of one dtype (the kernels'
``OPTIMIZER_DTYPES``: float32 or float64) on one device, and one set of
hyperparameters: the optimizer calls this once per parameter group. A 16-bit
parameter is updated through a float32 master copy kept in the optimizer state (so
small updates are not lost to bf16 rounding) and written back rounded; its other
state is float32 too.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from types import ModuleType
from typing import Any

import numpy as np

from minitorch_accum.kernels.arrays import Array
from minitorch_accum.kernels.dtypes import OPTIMIZER_DTYPES
from minitorch_accum.nn import Param

__all__ = ["FusedGroup", "group_for_fused_step"]


class FusedGroup:
    """Arrays for one launch; ``write_back()``, after it, copies updated float32 values into
    16-bit params and counts the step as an in-place write of every param (its version)."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.members: list[Param] = []
        self.params: list[Array] = []
        self.grads: list[Array] = []
        self._write_back: list[tuple[Param, Array]] = []
        self.xp: ModuleType = np  # the array module of the group's device, set by add()

    def add(self, name: str, param: Param, grad: Array, state: dict[str, Any]) -> None:
        self.xp = param.backend.xp
        data = param.data
        if data.dtype not in OPTIMIZER_DTYPES:
            if "master" not in state:
                state["master"] = data.astype(np.float32)
            data = state["master"]
            self._write_back.append((param, data))
        if grad.dtype != data.dtype or not grad.flags.c_contiguous:
            grad = param.backend.xp.ascontiguousarray(grad, dtype=data.dtype)
        self.names.append(name)
        self.members.append(param)
        self.params.append(data)
        self.grads.append(grad)

    def write_back(self) -> None:
        for param, updated in self._write_back:
            param.data = updated.astype(param.dtype)
        for param in self.members:
            param.bump_version()  # a graph built before this step can no longer be differentiated


def group_for_fused_step(
    entries: Iterable[tuple[str, Param, Array]], key: Callable[[str, Param], Hashable],
    state: dict[str, dict[str, Any]],
) -> list[FusedGroup]:
    """Split entries into groups by (device, compute dtype, ``key(name, param)``); ``state``
    (the optimizer's, by name) receives the float32 master copy of 16-bit parameters."""
    groups: dict[Hashable, FusedGroup] = {}
    for name, param, grad in entries:
        compute = param.dtype if param.dtype in OPTIMIZER_DTYPES else np.dtype(np.float32)
        group_key = (param.device, compute, key(name, param))
        groups.setdefault(group_key, FusedGroup()).add(name, param, grad, state.setdefault(name, {}))
    return list(groups.values())

