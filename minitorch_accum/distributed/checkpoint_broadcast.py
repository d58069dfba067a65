"""Handing rank 0's checkpoint to every rank, so hosts need not share a file system.

Rank 0 reads and verifies the checkpoint; the others receive its JSON state (as bytes)
and its arrays (buffer broadcasts, never pickle), in a manifest order all ranks agree on.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from minitorch_accum.distributed.communicator import Communicator

__all__ = ["share_checkpoint"]

Arrays = dict[str, dict[str, np.ndarray]]


def _broadcast_bytes(comm: Communicator, payload: bytes | None) -> bytes:
    size = np.array([0 if payload is None else len(payload)], dtype=np.int64)
    comm.broadcast(size)
    buffer = np.frombuffer(payload, dtype=np.uint8).copy() if payload is not None else np.empty(int(size[0]), np.uint8)
    comm.broadcast(buffer)
    return buffer.tobytes()


def _dtype(name: str) -> np.dtype:
    try:
        return np.dtype(name)
    except TypeError:  # bfloat16 is known to NumPy only through ml_dtypes' type object
        import ml_dtypes

        return np.dtype(getattr(ml_dtypes, name))


def share_checkpoint(comm: Communicator, loaded: tuple[Arrays, dict[str, Any]] | None) -> tuple[Arrays, dict[str, Any]]:
    """Rank 0 passes the ``(arrays, state)`` it loaded (the others None); every rank returns them."""
    if comm.rank == 0:
        assert loaded is not None
        arrays, state = loaded
        manifest = [[group, name, array.dtype.name, list(array.shape)]
                    for group, tensors in sorted(arrays.items()) for name, array in sorted(tensors.items())]
        header = json.dumps({"state": state, "manifest": manifest}).encode()
    else:
        header = None
    received = json.loads(_broadcast_bytes(comm, header))
    out: Arrays = {}
    for group, name, dtype_name, shape in received["manifest"]:
        dtype = _dtype(dtype_name)
        array = (np.ascontiguousarray(loaded[0][group][name]) if comm.rank == 0 and loaded is not None
                 else np.empty(shape, dtype=dtype))
        comm.broadcast(array)
        out.setdefault(group, {})[name] = array
    return out, received["state"]
