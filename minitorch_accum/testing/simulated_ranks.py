"""R data-parallel ranks in one process, one thread each, for tests that need no MPI.

    results = run_ranks(2, lambda comm: train_my_share(comm))   # [rank 0's result, rank 1's]

Each rank gets a ``ThreadCommunicator`` (a real ``Communicator``: the library's
``DataParallel`` and ``ZeroRedundancy`` run on it unchanged, buckets, facts and all). A
collective deposits this rank's array, waits for every rank, and each rank then adds the
deposits in rank order, so every rank ends with the same bits, as MPI promises. The
engine's only per-process state that matters here, grad mode, is per thread. A rank
that raises aborts the others' waits, and ``run_ranks`` re-raises the first error.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

from minitorch_accum.distributed import Communicator

__all__ = ["RankFailedError", "ThreadCommunicator", "run_ranks"]

T = TypeVar("T")
_WAIT_SECONDS = 120.0  # a rank stuck this long in a collective means another never arrived


class RankFailedError(RuntimeError):
    """A simulated rank raised; the message names the rank, ``__cause__`` is its error."""


class _World:
    def __init__(self, size: int) -> None:
        self.size = size
        self.barrier = threading.Barrier(size, timeout=_WAIT_SECONDS)
        self.slots: list[Any] = [None] * size


class ThreadCommunicator(Communicator):
    """Rank ``rank`` of a world of threads made by ``run_ranks``."""

    def __init__(self, world: _World, rank: int) -> None:
        super().__init__()
        self._world = world
        self.rank = rank
        self.world_size = world.size

    def _exchange(self, array: Any) -> list[Any]:
        """Every rank's copy of ``array``, in rank order (two barriers: deposit, then read)."""
        world = self._world
        world.slots[self.rank] = np.array(array, copy=True)
        world.barrier.wait()
        gathered = list(world.slots)
        world.barrier.wait()  # nobody deposits the next collective's array before all have read
        return gathered

    def _allreduce(self, array: Any) -> None:
        gathered = self._exchange(array)
        total = gathered[0].copy()
        for other in gathered[1:]:
            total += other
        array[...] = total

    def _reduce_scatter(self, array: Any, shard: Any) -> None:
        whole = np.array(array, copy=True)
        self._allreduce(whole)
        n = shard.size
        shard.reshape(-1)[...] = whole.reshape(-1)[self.rank * n:(self.rank + 1) * n]

    def _allgather(self, shard: Any, array: Any) -> None:
        gathered = self._exchange(shard.reshape(-1))
        array.reshape(-1)[...] = np.concatenate(gathered)

    def _broadcast(self, array: Any, root: int) -> None:
        array[...] = self._exchange(array)[root]

    def abort(self, code: int = 1) -> None:
        self._world.barrier.abort()
        raise SystemExit(code)


def run_ranks(world_size: int, fn: Callable[[ThreadCommunicator], T]) -> list[T]:
    """Run ``fn(comm)`` on ``world_size`` threads, one communicator each; their results by rank."""
    if isinstance(world_size, bool) or not isinstance(world_size, int) or world_size < 1:
        raise ValueError(f"run_ranks: world_size must be a positive int, got {world_size!r}")
    world = _World(world_size)
    results: list[Any] = [None] * world_size
    errors: list[tuple[int, BaseException]] = []

    def rank_main(rank: int) -> None:
        try:
            results[rank] = fn(ThreadCommunicator(world, rank))
        except BaseException as error:  # the rank's failure must not leave the others waiting
            errors.append((rank, error))
            world.barrier.abort()

    threads = [threading.Thread(target=rank_main, args=(r,), name=f"rank-{r}") for r in range(world_size)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    first = next(((r, e) for r, e in sorted(errors, key=lambda item: item[0])
                  if not isinstance(e, threading.BrokenBarrierError)), errors[0] if errors else None)
    if first is not None:
        rank, error = first
        raise RankFailedError(f"simulated rank {rank} of {world_size} failed: "
                              f"{type(error).__name__}: {error}") from error
    return results
