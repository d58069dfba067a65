"""Keeping every rank's parameters the same: one broadcast at the start, a cheap check later.

Data-parallel ranks take identical optimizer steps on identical summed gradients, so
their parameters stay equal bit for bit, as long as they started equal. ``broadcast_parameters``
makes them start equal (rank 0's values); ``parameters_agree`` compares a 16-byte digest
of every rank's parameters (one small all-gather), to catch a rank that drifted.
"""

from __future__ import annotations

import hashlib

import numpy as np

from minitorch_accum.distributed.communicator import Communicator
from minitorch_accum.nn import Module

__all__ = ["ParameterMismatchError", "broadcast_parameters", "parameter_digest", "parameters_agree"]


class ParameterMismatchError(RuntimeError):
    """Ranks hold different parameters: their steps are no longer the same."""


def broadcast_parameters(model: Module, comm: Communicator, root: int = 0) -> None:
    """Every parameter and buffer of ``model`` takes ``root``'s values, in place."""
    for _, param in model.named_parameters():
        comm.broadcast(param.data, root)
        param.bump_version()
    for _, buffer in model.named_buffers():
        comm.broadcast(buffer.value, root)


def parameter_digest(model: Module) -> bytes:
    """16 bytes that change when any bit of any parameter changes."""
    digest = hashlib.blake2b(digest_size=16)
    for name, param in model.named_parameters():
        digest.update(name.encode())
        digest.update(np.ascontiguousarray(param.numpy()).view(np.uint8).tobytes())
    return digest.digest()


def parameters_agree(model: Module, comm: Communicator, step: int | None = None) -> None:
    """ParameterMismatchError (on every rank) unless every rank holds the same parameters."""
    if comm.world_size == 1:
        return
    mine = np.frombuffer(parameter_digest(model), dtype=np.uint8).copy()
    every = np.empty(mine.size * comm.world_size, dtype=np.uint8)
    comm.allgather(mine, every)
    rows = every.reshape(comm.world_size, -1)
    differing = [r for r in range(comm.world_size) if not np.array_equal(rows[r], rows[0])]
    if differing:
        when = "" if step is None else f" after optimizer step {step}"
        raise ParameterMismatchError(
            f"data-parallel ranks {differing} hold different parameters than rank 0{when}; their updates "
            "diverged (a rank stepped on other gradients, or its parameters were changed by hand)")
