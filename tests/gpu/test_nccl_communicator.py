"""NCCL through CuPy on one GPU (a world of one rank; under mpiexec the id goes over MPI):
every collective in place on device arrays, and a data-parallel window equal to one without.

Skipped without a CUDA device; run by benchmarks/gpu_check.sh (`mpiexec -n 2` on two GPUs
exercises the real reduction)."""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def nccl() -> object:
    from minitorch_accum.distributed.nccl_communicator import NCCLCommunicator

    return NCCLCommunicator()


def test_collectives_on_device_arrays(nccl: object) -> None:
    import cupy

    data = cupy.arange(8, dtype=cupy.float32)
    nccl.allreduce(data)
    np.testing.assert_array_equal(data.get(), np.arange(8, dtype=np.float32))
    shard = cupy.empty(8, dtype=cupy.float32)
    nccl.reduce_scatter(data, shard)
    whole = cupy.empty(8, dtype=cupy.float32)
    nccl.allgather(shard, whole)
    np.testing.assert_array_equal(whole.get(), np.arange(8, dtype=np.float32))
    nccl.iallreduce(data).wait()
    facts = nccl.allreduce_scalars([3, 4], np.int64)
    assert list(facts) == [3, 4]
    with pytest.raises(TypeError, match="NCCL moves GPU"):
        nccl._allreduce(np.zeros(2, np.float32))


def test_a_window_reduced_over_nccl_equals_one_without(nccl: object) -> None:
    import minitorch_accum as mta
    from minitorch_accum import nn
    from minitorch_accum.accum import Accumulator
    from minitorch_accum.distributed import DataParallel

    def window(reducer: object) -> list[np.ndarray]:
        mta.manual_seed(0)
        model = nn.Sequential(nn.Linear(4, 6, dtype="float64", device="cuda"), nn.Tanh(),
                              nn.Linear(6, 2, dtype="float64", device="cuda"))
        acc = Accumulator(model, steps=2, accum_dtype="float64", reducer=reducer)
        x = np.random.default_rng(1).normal(size=(6, 4))
        for i in range(2):
            acc.backward((model(mta.tensor(x[i * 3:(i + 1) * 3], dtype="float64", device="cuda")) ** 2).sum(),
                         num_items=3)
        grads = acc.grads()
        return [mta.Tensor(grads[p]).numpy() for p in model.parameters()]

    for a, b in zip(window(DataParallel(nccl)), window(None), strict=True):
        np.testing.assert_array_equal(a, b)
