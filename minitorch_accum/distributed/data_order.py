"""One global data order, sliced by rank.

An epoch's order (fixed by seed and epoch alone, see DataLoader) is cut into micro-batches
of ``b`` items; window ``w`` is the global slice of micro-batches ``[w*R*k, (w+1)*R*k)``,
and rank ``r`` takes the ``k`` of them at ``[w*R*k + r*k, w*R*k + (r+1)*k)``. So ``R``
ranks x ``k`` x ``b`` see exactly the items, and the micro-batches, that one process
with ``R*k`` micro-batches of ``b`` sees: no sample is repeated to pad a rank, and in a
short last window a rank may hold fewer micro-batches than ``k``, or none (it still takes
part in the window's reduction).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["WindowShare", "rank_windows"]


@dataclass(frozen=True)
class WindowShare:
    """Window ``[first, stop)`` of global micro-batch indices, and those this rank takes."""

    first: int
    stop: int
    batches: tuple[int, ...]


def rank_windows(num_batches: int, k: int, world_size: int = 1, rank: int = 0, start: int = 0,
                 drop_last_window: bool = False) -> list[WindowShare]:
    """The windows of an epoch of ``num_batches`` micro-batches from micro-batch ``start`` on,
    with the indices ``rank`` takes in each (none, in a short last window, is possible)."""
    if k <= 0 or world_size <= 0 or not 0 <= rank < world_size or start < 0:
        raise ValueError(f"rank_windows: need k > 0, 0 <= rank < world_size and start >= 0, got k={k}, "
                         f"rank={rank}, world_size={world_size}, start={start}")
    per_window = k * world_size
    windows = []
    for first in range(start, num_batches, per_window):
        stop = min(first + per_window, num_batches)
        if drop_last_window and stop - first < per_window:
            break
        mine = first + rank * k
        windows.append(WindowShare(first, stop, tuple(range(mine, min(mine + k, stop)))))
    return windows
