"""File checkpoints that can be trusted: atomic, verified, never overwriting the last good one.

A checkpoint is a directory ``DIR/checkpoints/<name>/`` holding one safetensors file
per group of arrays (parameters, optimizer state, the gradient arena so a checkpoint
taken mid-window resumes mid-window) and ``state.json``: the caller's state (step,
epoch, loader position, RNG state, counters, any small facts), which groups the
checkpoint holds with each file's size and SHA-256, a save sequence number, and a
SHA-256 of the record itself, so an edited or damaged ``state.json`` is refused too.

Every save writes a new directory under a temporary name and renames it into place
only when complete; a directory that is already there is never renamed or replaced,
so a kill at any moment leaves ``latest`` pointing to an intact checkpoint (the old
one or the new one). ``latest`` is switched by an atomic file replace; only then are
the superseded and surplus checkpoints removed, and only directories this library
wrote (recognized by their ``state.json``), never anything a user put there. A damaged
checkpoint is never removed: a resume that passes over one, or a save that would supersede
one, renames it ``<name>.damaged-<n>`` (no longer a checkpoint of the directory) and says so.

The package, by concern (as Burn's checkpointer is split into base, file and strategy):

- ``record``: the state.json format, its checksum, and the JSON-exactness of a state;
- ``catalog``: which checkpoint directories are ours, newest first, and ``latest``;
- ``leftovers``: temporary names, cleanup after dead processes, format-1 checkpoints;
- ``retention``: keep the newest N intact ones;
- ``writing`` and ``verified_reading``: one checkpoint's files out and back in;
- ``file_checkpointer``: FileCheckpointer, the order of those steps.
"""

from minitorch_accum.train.checkpoint.errors import CheckpointError, CheckpointFallbackWarning, DamagedCheckpointWarning
from minitorch_accum.train.checkpoint.file_checkpointer import FileCheckpointer
from minitorch_accum.train.checkpoint.loaded import LoadedCheckpoint, SkippedCheckpoint
from minitorch_accum.train.checkpoint.record import CHECKPOINT_FORMAT

__all__ = [
    "CHECKPOINT_FORMAT",
    "CheckpointError",
    "CheckpointFallbackWarning",
    "DamagedCheckpointWarning",
    "FileCheckpointer",
    "LoadedCheckpoint",
    "SkippedCheckpoint",
]
