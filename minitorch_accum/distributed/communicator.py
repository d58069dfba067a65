"""The Communicator: the few collectives data-parallel accumulation needs, and what they cost.

Implementations wrap a real communication library (``MPICommunicator``: mpi4py, on the
CPU and across hosts; ``NCCLCommunicator``: NCCL through CuPy, on GPUs); ``LocalCommunicator``
is the world of one process. Every collective is counted (calls and bytes per rank), so a
test can check that a window costs one reduction, and ``maccum explain`` can show it.

All collectives work in place on contiguous arrays and sum (the only reduction a window
needs); ``allreduce_pairs`` sums Neumaier (sum, compensation) pairs without losing the
rounding error of the cross-rank additions, which makes a compensated window independent
of how it was split over ranks.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from minitorch_accum.distributed.pair_sum import add_pairs

__all__ = ["CollectiveCounts", "Communicator", "LocalCommunicator", "Pending"]


class Pending:
    """A collective in flight: ``wait()`` returns when its result is in place."""

    def __init__(self, wait: Any = None) -> None:
        self._wait = wait

    def wait(self) -> None:
        if self._wait is not None:
            wait, self._wait = self._wait, None
            wait()


@dataclass
class CollectiveCounts:
    """Calls and bytes (sent per rank) of each collective since the last ``clear()``."""

    calls: dict[str, int] = field(default_factory=dict)
    bytes: dict[str, int] = field(default_factory=dict)

    def add(self, name: str, nbytes: int) -> None:
        self.calls[name] = self.calls.get(name, 0) + 1
        self.bytes[name] = self.bytes.get(name, 0) + int(nbytes)

    def clear(self) -> None:
        self.calls.clear()
        self.bytes.clear()


def _check_contiguous(what: str, *arrays: Any) -> None:
    for array in arrays:
        if not array.flags.c_contiguous:
            raise ValueError(f"{what}: arrays must be C-contiguous, got shape {tuple(array.shape)}")


def _check_shard(what: str, array: Any, shard: Any, world_size: int) -> None:
    if array.size != shard.size * world_size or array.dtype != shard.dtype:
        raise ValueError(f"{what}: a buffer of {array.size} {array.dtype} elements splits into {world_size} "
                         f"shards of {array.size // max(world_size, 1)}, got a shard of {shard.size} {shard.dtype}")


class Communicator(ABC):
    """Rank, world size, and counted in-place collectives over the ranks."""

    rank: int
    world_size: int

    def __init__(self) -> None:
        self.counts = CollectiveCounts()

    # ------------------------------------------------------------ the library calls
    @abstractmethod
    def _allreduce(self, array: Any) -> None: ...

    @abstractmethod
    def _reduce_scatter(self, array: Any, shard: Any) -> None: ...

    @abstractmethod
    def _allgather(self, shard: Any, array: Any) -> None: ...

    @abstractmethod
    def _broadcast(self, array: Any, root: int) -> None: ...

    def _allreduce_pairs(self, acc: Any, comp: Any) -> None:
        """Gather every rank's pairs and add them in rank order: exact and the same everywhere.
        (MPI overrides this with a user-defined reduction that moves less data.)"""
        xp = _array_module(acc)
        gathered_acc = xp.empty((self.world_size, acc.size), dtype=acc.dtype)
        gathered_comp = xp.empty_like(gathered_acc)
        self._allgather(acc.reshape(-1), gathered_acc.reshape(-1))
        self._allgather(comp.reshape(-1), gathered_comp.reshape(-1))
        flat_acc, flat_comp = acc.reshape(-1), comp.reshape(-1)
        flat_acc[...] = gathered_acc[0]
        flat_comp[...] = gathered_comp[0]
        for r in range(1, self.world_size):
            add_pairs(gathered_acc[r], gathered_comp[r], flat_acc, flat_comp)

    def _reduce_scatter_pairs(self, acc: Any, comp: Any, acc_shard: Any, comp_shard: Any) -> None:
        whole_acc, whole_comp = acc.copy(), comp.copy()
        self._allreduce_pairs(whole_acc, whole_comp)
        n = acc_shard.size
        acc_shard.reshape(-1)[...] = whole_acc.reshape(-1)[self.rank * n:(self.rank + 1) * n]
        comp_shard.reshape(-1)[...] = whole_comp.reshape(-1)[self.rank * n:(self.rank + 1) * n]

    def abort(self, code: int = 1) -> None:
        """End every rank of the job (a failing rank must not leave the others waiting)."""
        raise SystemExit(code)

    # ------------------------------------------------------------------- public
    def allreduce(self, array: Any) -> None:
        """array = the sum of every rank's array, in place."""
        _check_contiguous("allreduce", array)
        self.counts.add("allreduce", array.nbytes)
        if self.world_size > 1:
            self._allreduce(array)

    def iallreduce(self, array: Any, comp: Any = None) -> Pending:
        """Start ``allreduce`` (or, with ``comp``, ``allreduce_pairs``) and return at once; the
        result is in place after ``wait()``. Counted as the blocking call."""
        _check_contiguous("iallreduce", array, *(() if comp is None else (comp,)))
        self.counts.add("allreduce", array.nbytes + (0 if comp is None else comp.nbytes))
        if self.world_size == 1:
            return Pending()
        return self._iallreduce(array, comp)

    def _iallreduce(self, array: Any, comp: Any) -> Pending:
        """Libraries without a nonblocking call reduce here, before returning."""
        if comp is None:
            self._allreduce(array)
        else:
            self._allreduce_pairs(array, comp)
        return Pending()

    def allreduce_pairs(self, acc: Any, comp: Any) -> None:
        """(acc, comp) = the compensated sum of every rank's (acc, comp) pairs, in place."""
        _check_contiguous("allreduce_pairs", acc, comp)
        self.counts.add("allreduce", acc.nbytes + comp.nbytes)
        if self.world_size > 1:
            self._allreduce_pairs(acc, comp)

    def reduce_scatter(self, array: Any, shard: Any) -> None:
        """shard = this rank's 1/world_size slice of the sum of every rank's array."""
        _check_contiguous("reduce_scatter", array, shard)
        _check_shard("reduce_scatter", array, shard, self.world_size)
        self.counts.add("reduce_scatter", array.nbytes)
        if self.world_size > 1:
            self._reduce_scatter(array, shard)
        else:
            shard[...] = array.reshape(shard.shape)

    def reduce_scatter_pairs(self, acc: Any, comp: Any, acc_shard: Any, comp_shard: Any) -> None:
        """This rank's slice of the compensated sum of every rank's (acc, comp) pairs."""
        _check_contiguous("reduce_scatter_pairs", acc, comp, acc_shard, comp_shard)
        _check_shard("reduce_scatter_pairs", acc, acc_shard, self.world_size)
        _check_shard("reduce_scatter_pairs", comp, comp_shard, self.world_size)
        self.counts.add("reduce_scatter", acc.nbytes + comp.nbytes)
        if self.world_size > 1:
            self._reduce_scatter_pairs(acc, comp, acc_shard, comp_shard)
        else:
            acc_shard[...] = acc.reshape(acc_shard.shape)
            comp_shard[...] = comp.reshape(comp_shard.shape)

    def allgather(self, shard: Any, array: Any) -> None:
        """array = every rank's shard, in rank order."""
        _check_contiguous("allgather", shard, array)
        _check_shard("allgather", array, shard, self.world_size)
        self.counts.add("allgather", shard.nbytes)
        if self.world_size > 1:
            self._allgather(shard, array)
        else:
            array[...] = shard.reshape(array.shape)

    def broadcast(self, array: Any, root: int = 0) -> None:
        """array = root's array, in place, on every rank."""
        _check_contiguous("broadcast", array)
        self.counts.add("broadcast", array.nbytes)
        if self.world_size > 1:
            self._broadcast(array, root)

    def allreduce_scalars(self, values: Any, dtype: Any) -> np.ndarray:
        """Sum a few host numbers over the ranks (counts, flags, bounds), counted apart from the
        gradient reductions as ``allreduce_facts``; returns them as a host array."""
        array = np.array(values, dtype=dtype).reshape(-1)
        self.counts.add("allreduce_facts", array.nbytes)
        if self.world_size > 1:
            self._allreduce_host(array)
        return array

    def _allreduce_host(self, array: np.ndarray) -> None:
        """Sum a host array in place (NCCL stages it through device memory)."""
        self._allreduce(array)

    def agree(self, flag: bool) -> bool:
        """True on every rank when ``flag`` is True on any rank."""
        return bool(self.allreduce_scalars([int(flag)], np.int64)[0])

    def __repr__(self) -> str:
        return f"{type(self).__name__}(rank={self.rank}, world_size={self.world_size})"


class LocalCommunicator(Communicator):
    """The world of one process: every collective is the identity (and still counted)."""

    rank = 0
    world_size = 1

    def _allreduce(self, array: Any) -> None:
        pass

    def _reduce_scatter(self, array: Any, shard: Any) -> None:
        shard[...] = array.reshape(shard.shape)

    def _allgather(self, shard: Any, array: Any) -> None:
        array[...] = shard.reshape(array.shape)

    def _broadcast(self, array: Any, root: int) -> None:
        pass


def _array_module(array: Any) -> Any:
    if isinstance(array, np.ndarray):
        return np
    import cupy

    return cupy
