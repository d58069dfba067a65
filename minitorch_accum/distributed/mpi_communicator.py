"""MPICommunicator: collectives through mpi4py, on host arrays, on one machine or many.

Only the buffer-based (uppercase) calls are used: arrays never go through pickle. Launch
with ``mpiexec -n R python -m mpi4py -m minitorch_accum.cli ...`` so that a rank that
fails aborts the whole job instead of leaving the others waiting in a collective.
The MPI runtime comes from the ``mpich`` wheel of the ``dist`` extra (mpi4py alone has
none); MPICH runs as root without extra flags.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from minitorch_accum.distributed.communicator import Communicator, Pending
from minitorch_accum.distributed.pair_sum import add_pairs

__all__ = ["MPICommunicator", "import_mpi"]


def import_mpi() -> Any:
    """mpi4py's MPI module, or an ImportError that says how to get it."""
    try:
        from mpi4py import MPI
    except ImportError as error:
        raise ImportError(
            f"data-parallel training on the CPU needs mpi4py and an MPI runtime ({error}); install them with "
            "pip install -e \".[dist]\" (mpi4py and the mpich wheel)"
        ) from None
    return MPI


class MPICommunicator(Communicator):
    """A Communicator over an mpi4py communicator (``COMM_WORLD`` by default)."""

    def __init__(self, comm: Any = None) -> None:
        super().__init__()
        self.MPI = import_mpi()
        self.comm = comm if comm is not None else self.MPI.COMM_WORLD
        self.rank = self.comm.Get_rank()
        self.world_size = self.comm.Get_size()
        self._pair_ops: dict[np.dtype, tuple[Any, Any]] = {}

    @staticmethod
    def _host(what: str, *arrays: Any) -> None:
        for array in arrays:
            if not isinstance(array, np.ndarray):
                raise TypeError(f"MPICommunicator.{what}: MPI moves host (NumPy) arrays; got "
                                f"{type(array).__name__} (use NCCLCommunicator for CuPy arrays)")

    @staticmethod
    def _raw(array: np.ndarray) -> Any:
        # bytes for what MPI has no type for (bfloat16 parameters); sums only take float/int arrays
        return array if array.dtype.char in "fdlqi" else array.view(np.uint8)

    def _allreduce(self, array: Any) -> None:
        self._host("allreduce", array)
        self.comm.Allreduce(self.MPI.IN_PLACE, array, op=self.MPI.SUM)

    def _iallreduce(self, array: Any, comp: Any) -> Pending:
        self._host("iallreduce", array, *(() if comp is None else (comp,)))
        if comp is None:
            return Pending(self.comm.Iallreduce(self.MPI.IN_PLACE, array, op=self.MPI.SUM).Wait)
        packed = np.stack([array.reshape(-1), comp.reshape(-1)], axis=1)
        pair, op = self._pair_op(array.dtype)
        request = self.comm.Iallreduce(self.MPI.IN_PLACE, [packed, pair], op=op)

        def finish() -> None:  # the packed copy lives until here, as the request needs
            request.Wait()
            array.reshape(-1)[...] = packed[:, 0]
            comp.reshape(-1)[...] = packed[:, 1]

        return Pending(finish)

    def _reduce_scatter(self, array: Any, shard: Any) -> None:
        self._host("reduce_scatter", array, shard)
        self.comm.Reduce_scatter_block(array, shard, op=self.MPI.SUM)

    def _allgather(self, shard: Any, array: Any) -> None:
        self._host("allgather", shard, array)
        self.comm.Allgather(self._raw(shard), self._raw(array))

    def _broadcast(self, array: Any, root: int) -> None:
        self._host("broadcast", array)
        self.comm.Bcast(self._raw(array), root=root)

    def _pair_op(self, dtype: np.dtype) -> tuple[Any, Any]:
        """An MPI datatype of one (acc, comp) pair and the user-defined op that adds pairs."""
        if dtype not in self._pair_ops:
            MPI = self.MPI
            base = MPI.DOUBLE if dtype == np.float64 else MPI.FLOAT
            pair = base.Create_contiguous(2).Commit()

            def add(inbuf: Any, inoutbuf: Any, datatype: Any) -> None:
                a = np.frombuffer(inbuf, dtype=dtype).reshape(-1, 2)
                b = np.frombuffer(inoutbuf, dtype=dtype).reshape(-1, 2)
                acc, comp = b[:, 0].copy(), b[:, 1].copy()
                add_pairs(a[:, 0], a[:, 1], acc, comp)
                b[:, 0], b[:, 1] = acc, comp

            self._pair_ops[dtype] = (pair, MPI.Op.Create(add, commute=True))
        return self._pair_ops[dtype]

    def _allreduce_pairs(self, acc: Any, comp: Any) -> None:
        self._host("allreduce_pairs", acc, comp)
        if acc.dtype not in (np.float32, np.float64):
            raise TypeError(f"allreduce_pairs: float32 or float64 pairs, got {acc.dtype}")
        # interleaved, so that MPI's segmentation of the buffer never separates a pair
        packed = np.stack([acc.reshape(-1), comp.reshape(-1)], axis=1)
        pair, op = self._pair_op(acc.dtype)
        self.comm.Allreduce(self.MPI.IN_PLACE, [packed, pair], op=op)
        acc.reshape(-1)[...] = packed[:, 0]
        comp.reshape(-1)[...] = packed[:, 1]

    def _reduce_scatter_pairs(self, acc: Any, comp: Any, acc_shard: Any, comp_shard: Any) -> None:
        self._host("reduce_scatter_pairs", acc, comp, acc_shard, comp_shard)
        packed = np.stack([acc.reshape(-1), comp.reshape(-1)], axis=1)
        out = np.empty((acc_shard.size, 2), dtype=acc.dtype)
        pair, op = self._pair_op(acc.dtype)
        self.comm.Reduce_scatter_block([packed, pair], [out, pair], op=op)
        acc_shard.reshape(-1)[...] = out[:, 0]
        comp_shard.reshape(-1)[...] = out[:, 1]

    def abort(self, code: int = 1) -> None:
        self.comm.Abort(code)
