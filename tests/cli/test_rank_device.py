"""Under mpiexec, ``--device cuda`` puts each rank of a host on its own GPU (it was parsed as
``cuda:0`` and every rank landed on GPU 0)."""

from __future__ import annotations

import pytest

from minitorch_accum.cli.main import build_parser
from minitorch_accum.cli.training_run import _rank_device
from minitorch_accum.train.settings import read_options


@pytest.mark.parametrize("variable", ["MPI_LOCALRANKID", "OMPI_COMM_WORLD_LOCAL_RANK"])
def test_each_local_rank_takes_its_own_gpu(monkeypatch: pytest.MonkeyPatch, variable: str) -> None:
    (device,) = read_options(build_parser().parse_args(["train", "--device", "cuda"]), "train")["devices"]
    monkeypatch.delenv("MPI_LOCALRANKID", raising=False)
    monkeypatch.delenv("OMPI_COMM_WORLD_LOCAL_RANK", raising=False)
    assert _rank_device(device) == "cuda:0"  # one process: the first GPU
    monkeypatch.setenv(variable, "1")
    assert _rank_device(device) == "cuda:1"
    assert _rank_device("cuda:3") == "cuda:3"  # a GPU named by the user stays
    assert _rank_device("cpu") == "cpu"
