"""What the Accumulator asks of data parallelism: make each rank's window the global window.

The distributed layer (above this one) implements it; the accumulation layer only calls
it, once per window, when the window closes. With ``R`` ranks each holding the sums of
its own micro-batches, ``reduce`` leaves every rank with the sums over all of them (or,
for ZeRO-1, with this rank's shard of those sums) and returns the global counts, so the
window is normalized once, by the items (or micro-batches) of every rank.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from minitorch_accum.accum.arena_store import ArenaStore

__all__ = ["WindowReducer"]


class WindowReducer(Protocol):
    #: ranks taking part: the arena is padded so each flat buffer splits into this many pieces
    shards: int
    #: True when, after ``reduce``, each rank holds only its shard of the summed gradient (ZeRO-1)
    sharded: bool

    def window_closing(self, store: ArenaStore) -> None:
        """The window's last micro-batch is about to run (a reducer may start reducing during it)."""

    def reduce(self, store: ArenaStore, micro_batches: int, items: int) -> tuple[int, int]:
        """Sum the window over all ranks (one collective phase); return the global
        (micro-batch, item) counts."""

    def finite_check(self, store: ArenaStore) -> bool:
        """True when the global window's gradient is finite (the same answer on every rank)."""

    def norm(self, store: ArenaStore) -> float:
        """Global L2 norm of the global window's sums."""

    def complete(self, store: ArenaStore) -> None:
        """Make every view hold the global sums (gathers the shards after a sharded reduce)."""
