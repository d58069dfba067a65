"""Which checkpoints to keep: the newest N that look intact; the rest of those are surplus.

A damaged checkpoint is neither counted (it would crowd out a good one, leaving fewer
than N to resume from) nor surplus (a user may want to look at it). "Damaged" here is the
cheap check (record and file sizes, no hashing); a checkpoint whose bytes are wrong at the
right size is found when loaded, and a resume then sets it aside (``FileCheckpointer.set_aside``).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from minitorch_accum.train.checkpoint.catalog import CatalogEntry, looks_intact, newest_first

__all__ = ["surplus_checkpoints"]


def surplus_checkpoints(entries: Iterable[CatalogEntry], keep: int) -> list[Path]:
    """The intact-looking checkpoints among ``entries`` beyond the newest ``keep``, newest first."""
    intact = [entry for entry in entries if looks_intact(entry)]
    return [entry.path for entry in newest_first(intact)[keep:]]
