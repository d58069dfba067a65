"""Making tensors: copies and shared memory, dtypes of fills and ranges, the default dtype."""

from __future__ import annotations

import numpy as np
import pytest

import minitorch_accum as mta
from minitorch_accum import nn


@pytest.fixture
def restore_default_dtype():
    before = mta.get_default_dtype()
    yield
    mta.set_default_dtype(before)


def test_tensor_copies_so_a_later_change_to_the_array_changes_nothing() -> None:
    values = np.array([1.0, 2.0, 3.0], dtype=np.float32)
    x = mta.tensor(values, requires_grad=True)
    y = x * mta.tensor(values)  # the gradient of x is the array's values at this time
    values[:] = 100.0
    np.testing.assert_array_equal(x.numpy(), [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(y.sum().backward()[x], [1.0, 2.0, 3.0])
    ids = np.array([1, 2])
    copied = mta.tensor(ids)
    ids[0] = 7
    assert copied.tolist() == [1, 2] and copied.dtype == mta.int64
    source = mta.tensor([1.0, 2.0])
    again = mta.tensor(source)
    source.data[0] = 5.0
    assert again.tolist() == [1.0, 2.0]


def test_from_numpy_shares_memory_and_keeps_the_dtype() -> None:
    values = np.array([1.0, 2.0], dtype=np.float64)
    x = mta.from_numpy(values)
    assert x.dtype == mta.float64 and np.shares_memory(x.data, values)
    values[0] = 9.0
    assert x.tolist() == [9.0, 2.0]
    assert mta.from_numpy(np.array([True])).dtype == mta.bool
    assert mta.from_numpy(values, requires_grad=True).requires_grad
    with pytest.raises(TypeError, match=r"from_numpy expects a numpy\.ndarray, got list"):
        mta.from_numpy([1.0])
    with pytest.raises(TypeError, match="from_numpy: unsupported dtype complex128"):
        mta.from_numpy(np.zeros(2, dtype=complex))


def test_fills_and_ranges_take_pytorchs_dtypes() -> None:
    assert mta.zeros(2, 3, dtype=mta.int64).dtype == mta.int64
    assert mta.ones((2,), dtype="bool").tolist() == [True, True]
    assert mta.zeros(2, dtype=mta.int32).dtype == mta.int32 and mta.ones(1, dtype=mta.uint8).dtype == mta.uint8
    assert mta.full((2, 2), 7).dtype == mta.int64 and mta.full(3, True).dtype == mta.bool
    assert mta.full((2,), 0.5).dtype == mta.float32 and mta.full((2,), 1, dtype="float64").tolist() == [1.0, 1.0]
    assert mta.arange(4).tolist() == [0, 1, 2, 3] and mta.arange(4).dtype == mta.int64
    assert mta.arange(1, 7, 2).tolist() == [1, 3, 5]
    np.testing.assert_allclose(mta.arange(0.0, 1.0, 0.25).numpy(), [0.0, 0.25, 0.5, 0.75])
    assert mta.arange(0.0, 1.0, 0.25).dtype == mta.float32 and mta.arange(3, dtype="float64").dtype == mta.float64
    x = mta.arange(6).view(2, 3)
    assert mta.zeros_like(x).dtype == mta.int64 and mta.ones_like(x, dtype="float32").dtype == mta.float32
    assert mta.full_like(x, 2).tolist() == [[2, 2, 2], [2, 2, 2]]
    with pytest.raises(TypeError, match="only float tensors can require grad; this one is int64"):
        mta.zeros(2, dtype="int64", requires_grad=True)
    with pytest.raises(ValueError, match="arange: step must not be 0"):
        mta.arange(0, 3, 0)


def test_default_dtype_reaches_tensors_and_layers(restore_default_dtype: None) -> None:
    assert mta.get_default_dtype() == mta.float32
    mta.set_default_dtype(mta.float64)
    assert mta.tensor([1.0]).dtype == mta.float64 and mta.zeros(2).dtype == mta.float64
    assert mta.randn(2).dtype == mta.float64 and mta.rand(2).dtype == mta.float64
    assert mta.full((1,), 0.5).dtype == mta.float64 and mta.arange(0.0, 1.0).dtype == mta.float64
    assert mta.tensor(np.array([1, 2])).dtype == mta.int64  # integer data keeps its dtype
    for layer in (nn.Linear(2, 3), nn.Embedding(4, 2), nn.LayerNorm(3), nn.BatchNorm1d(3)):
        assert all(p.dtype == mta.float64 for p in layer.parameters()), layer
    assert nn.Linear(2, 3, dtype="float32").weight.dtype == mta.float32
    with pytest.raises(TypeError, match="unsupported dtype 'int64'"):
        mta.set_default_dtype("int64")
