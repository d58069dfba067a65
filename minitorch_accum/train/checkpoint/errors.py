"""What a checkpoint operation raises or warns: one error for every damaged, missing or unwritable checkpoint."""

from __future__ import annotations

__all__ = ["CheckpointError", "CheckpointFallbackWarning", "DamagedCheckpointWarning"]


class CheckpointError(RuntimeError):
    """A checkpoint is missing, incomplete or corrupt, or cannot be written."""


class CheckpointFallbackWarning(UserWarning):
    """``latest`` could not be used and an older intact checkpoint was loaded instead."""


class DamagedCheckpointWarning(UserWarning):
    """A save found a damaged checkpoint under the tag it supersedes and set it aside (kept)."""
