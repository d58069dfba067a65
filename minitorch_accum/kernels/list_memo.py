"""What a listed kernel call learnt about its arrays (device, chunk tables), remembered for the
same arrays.

A ``multi_*`` call on a device checks every array in Python and builds its chunk tables: over
GPT-2 small's 148 gradients that took 1.3 ms of the H200 host's time per call, against 0.37 ms
of kernel (benchmarks/results/multi_add_scale_host-2026-12-04-H200.log). A training loop hands
the same array objects call after call, so the second call can skip both. Nothing is trusted
blindly: an entry is keyed on the arrays' identities, holds them only weakly (a remembered list
never keeps device memory alive), and is used only while every array is the same live object
with the same dtype and strides (and, where written, still writeable). Those are all the
checks and the tables read besides the address, which an array object cannot change.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from minitorch_accum.kernels.arrays import Array

__all__ = ["CAPACITY", "ListMemo", "Remembered"]

CAPACITY = 16  # lists remembered at once: a loop's few (gradients into accumulators, per dtype)


@dataclass(frozen=True)
class Remembered:
    """What the first call found: the one device of its arrays and its plan's array-only part."""

    device: str
    value: Any


@dataclass(frozen=True)
class _Entry:
    refs: tuple[weakref.ref[Any], ...]
    states: tuple[Hashable, ...]
    remembered: Remembered


def _state(a: Any, written: bool) -> Hashable:
    # NumPy lets a live array change its dtype, shape, strides and writeable flag in place, CuPy
    # its shape; its buffer is fixed, so its size follows from the dtype, and its contiguity from
    # the strides (which a new shape changes too).
    writeable = getattr(a.flags, "writeable", True) if written else True
    return a.dtype, a.strides, writeable


class ListMemo:
    """A small LRU of listed calls, keyed on (kernel, settings, each array's identity)."""

    def __init__(self, capacity: int = CAPACITY) -> None:
        self.capacity = capacity
        self._entries: OrderedDict[Hashable, _Entry] = OrderedDict()
        self._lock = threading.Lock()  # thread ranks call kernels concurrently

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    @staticmethod
    def _flat(lists: Sequence[Sequence[Array] | None], written: Sequence[bool], flag: Array | None
              ) -> tuple[list[Any], list[bool]]:
        arrays: list[Any] = []
        writes: list[bool] = []
        for items, write in zip(lists, written, strict=True):
            if items is None:
                continue
            arrays.extend(items)
            writes.extend([write] * len(items))
        if flag is not None:
            arrays.append(flag)
            writes.append(True)
        return arrays, writes

    @staticmethod
    def _key(kernel: str, settings: Hashable, lists: Sequence[Sequence[Array] | None], flag: Array | None
             ) -> Hashable:
        shape = tuple(-1 if items is None else len(items) for items in lists)
        ids = tuple(id(a) for items in lists if items is not None for a in items)
        return kernel, settings, shape, ids, id(flag)

    def find(self, kernel: str, settings: Hashable, lists: Sequence[Sequence[Array] | None],
             written: Sequence[bool], flag: Array | None) -> Remembered | None:
        """What an earlier call over these very arrays found, or None (then the caller checks and
        plans, and calls ``remember``). ``lists`` are the call's lists (None where absent),
        ``written`` whether the kernel writes each list."""
        if not all(isinstance(items, (list, tuple)) or items is None for items in lists):
            return None  # the checks name what is wrong
        key = self._key(kernel, settings, lists, flag)
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            self._entries.move_to_end(key)
        arrays, writes = self._flat(lists, written, flag)
        for a, write, ref, state in zip(arrays, writes, entry.refs, entry.states, strict=True):
            if ref() is not a or _state(a, write) != state:
                with self._lock:
                    self._entries.pop(key, None)
                return None
        return entry.remembered

    def remember(self, kernel: str, settings: Hashable, lists: Sequence[Sequence[Array] | None],
                 written: Sequence[bool], flag: Array | None, remembered: Remembered) -> None:
        """Keep what a checked call found; silently nothing for arrays that take no weak reference."""
        arrays, writes = self._flat(lists, written, flag)
        try:
            refs = tuple(weakref.ref(a) for a in arrays)
        except TypeError:
            return
        entry = _Entry(refs, tuple(_state(a, w) for a, w in zip(arrays, writes, strict=True)), remembered)
        key = self._key(kernel, settings, lists, flag)
        with self._lock:
            self._entries[key] = entry
            self._entries.move_to_end(key)
            while len(self._entries) > self.capacity:
                self._entries.popitem(last=False)
