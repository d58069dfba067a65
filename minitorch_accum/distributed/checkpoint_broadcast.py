"""Handing rank 0's checkpoint to every rank, so hosts need not share a file system.

Rank 0 reads and verifies the checkpoint; the others receive its JSON state (as bytes)
and its arrays (buffer broadcasts, never pickle), in a manifest order all ranks agree on.
A smaller JSON value goes the same way (``broadcast_json``: the settings a resume rebuilds its
run from, before the run exists).
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from minitorch_accum.distributed.communicator import Communicator

__all__ = ["broadcast_json", "gather_json", "share_checkpoint"]

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


def broadcast_json(comm: Communicator, value: Any) -> Any:
    """Rank 0's small JSON value (the others pass None) on every rank: what rank 0 read of a run's directory."""
    return json.loads(_broadcast_bytes(comm, json.dumps(value).encode() if comm.rank == 0 else None))


def gather_json(comm: Communicator, value: Any) -> list[Any]:
    """Every rank's small JSON value, in rank order, on every rank (e.g. each rank's RNG state)."""
    mine = json.dumps(value).encode()
    sizes = np.zeros(comm.world_size, dtype=np.int64)
    comm.allgather(np.array([len(mine)], dtype=np.int64), sizes)
    width = int(sizes.max())
    padded = np.zeros(width, dtype=np.uint8)
    padded[:len(mine)] = np.frombuffer(mine, dtype=np.uint8)
    every = np.empty(width * comm.world_size, dtype=np.uint8)
    comm.allgather(padded, every)
    rows = every.reshape(comm.world_size, width)
    return [json.loads(rows[r, :sizes[r]].tobytes()) for r in range(comm.world_size)]
