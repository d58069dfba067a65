"""The NCCL communicator's bootstrap, on the CPU: the unique id goes from rank 0 to every rank as
the object CuPy made it. CuPy 14 returns bytes where CuPy 13 returned a tuple of ints; the first
GPU run (2026-12-04, H200, CuPy 14.2) failed because the id was forced into an int64 array.

A stand-in ``cupy.cuda.nccl`` records what the constructor received."""

from __future__ import annotations

import sys
import types
from typing import Any

import numpy as np
import pytest

from minitorch_accum.distributed.nccl_communicator import NCCLCommunicator

DRAWN_BYTES = bytes(range(7, 135))  # 128 bytes, as CuPy 14 hands them out
DRAWN_TUPLE = tuple(range(-64, 64))  # 128 signed chars, as CuPy 13 did


def _fake_cupy(monkeypatch: pytest.MonkeyPatch, drawn: Any) -> list[tuple[int, Any, int]]:
    made: list[tuple[int, Any, int]] = []

    class NcclCommunicator:
        def __init__(self, ndev: int, comm_id: Any, rank: int) -> None:
            made.append((ndev, comm_id, rank))

    nccl = types.SimpleNamespace(get_unique_id=lambda: drawn, NcclCommunicator=NcclCommunicator,
                                 NCCL_FLOAT32=7, NCCL_FLOAT64=8, NCCL_INT64=4, NCCL_UINT8=1)
    cuda = types.ModuleType("cupy.cuda")
    cuda.nccl = nccl  # type: ignore[attr-defined]
    cupy = types.ModuleType("cupy")
    cupy.cuda = cuda  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    monkeypatch.setitem(sys.modules, "cupy.cuda", cuda)
    return made


class _FakeWorld:
    """An MPI communicator of `size` ranks seen from `rank`; bcast hands over rank 0's object."""

    def __init__(self, rank: int, size: int, root_object: Any) -> None:
        self.rank, self.size, self.root_object = rank, size, root_object
        self.sent: list[Any] = []

    def Get_rank(self) -> int:
        return self.rank

    def Get_size(self) -> int:
        return self.size

    def bcast(self, obj: Any, root: int = 0) -> Any:
        assert root == 0
        self.sent.append(obj)
        return self.root_object


@pytest.mark.parametrize("drawn", [DRAWN_BYTES, DRAWN_TUPLE], ids=["cupy14-bytes", "cupy13-tuple"])
def test_one_process_passes_the_id_as_drawn(monkeypatch: pytest.MonkeyPatch, drawn: Any) -> None:
    made = _fake_cupy(monkeypatch, drawn)
    comm = NCCLCommunicator()
    assert (comm.rank, comm.world_size) == (0, 1)
    assert made == [(1, drawn, 0)]
    assert type(made[0][1]) is type(drawn)


@pytest.mark.parametrize("drawn", [DRAWN_BYTES, DRAWN_TUPLE], ids=["cupy14-bytes", "cupy13-tuple"])
def test_every_rank_gets_rank_zeros_id(monkeypatch: pytest.MonkeyPatch, drawn: Any) -> None:
    made = _fake_cupy(monkeypatch, drawn)
    root = _FakeWorld(0, 3, drawn)
    NCCLCommunicator(comm=root)
    assert root.sent == [drawn]  # rank 0 sends what it drew
    other = _FakeWorld(2, 3, drawn)
    NCCLCommunicator(comm=other)
    assert other.sent == [None]  # rank 2 draws nothing of its own
    assert made == [(3, drawn, 0), (3, drawn, 2)]


def test_a_launched_world_bootstraps_over_mpi_without_being_handed_a_communicator(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from minitorch_accum.distributed import nccl_communicator

    made = _fake_cupy(monkeypatch, DRAWN_BYTES)
    world = _FakeWorld(1, 2, DRAWN_BYTES)
    monkeypatch.setattr(nccl_communicator, "launched_world_size", lambda: 2)
    monkeypatch.setattr(nccl_communicator, "import_mpi", lambda: types.SimpleNamespace(COMM_WORLD=world))
    comm = NCCLCommunicator()
    assert (comm.rank, comm.world_size) == (1, 2)
    assert world.sent == [None] and made == [(2, DRAWN_BYTES, 1)]


def test_each_dtype_travels_as_its_nccl_type(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_cupy(monkeypatch, DRAWN_BYTES)
    comm = NCCLCommunicator()
    assert [comm._type(np.zeros(1, dtype)) for dtype in (np.float32, np.float64, np.int64, np.uint8)] == [7, 8, 4, 1]
    with pytest.raises(TypeError, match="NCCLCommunicator: no NCCL type for float16"):
        comm._type(np.zeros(1, np.float16))


def test_without_cupy_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "cupy", None)
    with pytest.raises(ImportError, match=r"NCCLCommunicator needs CuPy with NCCL .*install the dist-cuda extra"):
        NCCLCommunicator()
