"""NCCLCommunicator: collectives on GPU arrays through NCCL (``cupy.cuda.nccl``).

The launcher stays ``mpiexec``: rank 0 draws NCCL's unique id and MPI broadcasts it (as an
int array, not pickled), then every rank joins one NCCL communicator on its own GPU. A
process not started by a launcher is a world of one and needs no MPI.
Collectives run on the current CuPy stream. NCCL has no user-defined reductions, so
compensated pairs take the gather-and-add path of the Communicator base.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from minitorch_accum.distributed.communicator import Communicator
from minitorch_accum.distributed.launch_environment import launched_world_size
from minitorch_accum.distributed.mpi_communicator import import_mpi

__all__ = ["NCCLCommunicator"]


class NCCLCommunicator(Communicator):
    """A Communicator over NCCL, one GPU per rank, bootstrapped through MPI."""

    def __init__(self, comm: Any = None) -> None:
        super().__init__()
        try:
            import cupy
            from cupy.cuda import nccl
        except ImportError as error:
            raise ImportError(f"NCCLCommunicator needs CuPy with NCCL ({error}); install the dist-cuda extra") from None
        self.mpi: Any = None
        if comm is not None or launched_world_size() > 1:
            self.mpi = comm if comm is not None else import_mpi().COMM_WORLD
        self.rank = 0 if self.mpi is None else self.mpi.Get_rank()
        self.world_size = 1 if self.mpi is None else self.mpi.Get_size()  # one process needs no MPI
        self.cupy, self.nccl = cupy, nccl
        # The id travels as the object CuPy made it (a tuple of 128 ints up to CuPy 13, bytes in
        # CuPy 14), so each release's constructor gets back the type it hands out.
        unique_id = nccl.get_unique_id() if self.rank == 0 else None
        if self.mpi is not None:
            unique_id = self.mpi.bcast(unique_id, root=0)
        self.comm = nccl.NcclCommunicator(self.world_size, unique_id, self.rank)
        self._types = {np.dtype(np.float32): nccl.NCCL_FLOAT32, np.dtype(np.float64): nccl.NCCL_FLOAT64,
                       np.dtype(np.int64): nccl.NCCL_INT64, np.dtype(np.uint8): nccl.NCCL_UINT8}

    def _device(self, what: str, *arrays: Any) -> None:
        for array in arrays:
            if not hasattr(array, "__cuda_array_interface__"):
                raise TypeError(f"NCCLCommunicator.{what}: NCCL moves GPU (CuPy) arrays; got {type(array).__name__}")

    def _type(self, array: Any) -> int:
        try:
            return self._types[np.dtype(array.dtype)]
        except KeyError:
            raise TypeError(f"NCCLCommunicator: no NCCL type for {array.dtype}") from None

    def _stream(self) -> int:
        return self.cupy.cuda.get_current_stream().ptr

    @staticmethod
    def _raw(array: Any) -> Any:
        return array if array.dtype.kind in "fi" and array.dtype.itemsize >= 4 else array.view("uint8")

    def _allreduce(self, array: Any) -> None:
        self._device("allreduce", array)
        ptr = array.data.ptr
        self.comm.allReduce(ptr, ptr, array.size, self._type(array), self.nccl.NCCL_SUM, self._stream())

    def _allreduce_host(self, array: np.ndarray) -> None:
        staged = self.cupy.asarray(array)
        self._allreduce(staged)
        array[...] = staged.get()

    def _reduce_scatter(self, array: Any, shard: Any) -> None:
        self._device("reduce_scatter", array, shard)
        self.comm.reduceScatter(array.data.ptr, shard.data.ptr, shard.size, self._type(array), self.nccl.NCCL_SUM,
                                self._stream())

    def _allgather(self, shard: Any, array: Any) -> None:
        if isinstance(array, np.ndarray):  # small host facts (digests, RNG states): staged on the device
            staged = self.cupy.empty(array.shape, dtype=array.dtype)
            self._allgather(self.cupy.asarray(shard), staged)
            array[...] = staged.get()
            return
        self._device("allgather", shard, array)
        shard, array = self._raw(shard), self._raw(array)
        self.comm.allGather(shard.data.ptr, array.data.ptr, shard.size, self._type(shard), self._stream())

    def _broadcast(self, array: Any, root: int) -> None:
        if isinstance(array, np.ndarray):  # a host array (a checkpoint handed to the ranks): MPI
            if self.mpi is not None:
                self.mpi.Bcast(array.view(np.uint8), root=root)
            return
        raw = self._raw(array)
        self.comm.bcast(raw.data.ptr, raw.size, self._type(raw), root, self._stream())

    def abort(self, code: int = 1) -> None:
        self.comm.abort()
        if self.mpi is None:
            raise SystemExit(code)
        self.mpi.Abort(code)
