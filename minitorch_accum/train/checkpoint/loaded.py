"""What a load hands back: the verified arrays and state, and what was passed over to reach them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["LoadedCheckpoint", "SkippedCheckpoint"]


@dataclass(frozen=True)
class SkippedCheckpoint:
    """A checkpoint (or the ``latest`` pointer) passed over while loading, and why; ``kept_as``:
    where a damaged checkpoint directory was set aside (renamed, never removed), if it was."""

    path: Path
    reason: str
    kept_as: Path | None = None

    def describe(self) -> str:
        return self.reason + (f" (kept as {self.kept_as.name})" if self.kept_as is not None else "")


@dataclass(frozen=True)
class LoadedCheckpoint:
    """What :meth:`FileCheckpointer.load_checkpoint` read: the verified arrays and state,
    where they came from, and what was passed over to get there."""

    path: Path
    tag: str
    arrays: dict[str, dict[str, np.ndarray]]
    state: dict[str, Any]
    skipped: tuple[SkippedCheckpoint, ...] = ()

    @property
    def fell_back(self) -> bool:
        return bool(self.skipped)

    @property
    def message(self) -> str | None:
        """One line for the user when ``latest`` was not used (None when it was)."""
        if not self.skipped:
            return None
        reasons = "; ".join(skip.describe() for skip in self.skipped)
        return f"{reasons}; using the newest intact checkpoint {self.path} instead"
