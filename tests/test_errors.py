"""Bad input gets an error that names what was wrong: shapes, dtypes, devices, axes."""

from __future__ import annotations

import numpy as np
import pytest

import minitorch_accum as mta
from minitorch_accum import OpError, nn
from minitorch_accum.backend import NumpyBackend, parse_device
from minitorch_accum.backend.device import Device


def test_broadcast_mismatch_names_op_and_both_shapes() -> None:
    with pytest.raises(OpError, match=r"add: shapes \(2, 3\) and \(4,\) cannot be broadcast together"):
        mta.ones(2, 3) + mta.ones(4)
    with pytest.raises(OpError, match=r"mul: shapes \(3,\) and \(2,\)"):
        mta.ones(3) * mta.ones(2)


def test_matmul_mismatch_names_both_shapes() -> None:
    with pytest.raises(OpError, match=r"matmul: shapes \(3, 4\) and \(5, 6\) are not aligned"):
        mta.ones(3, 4) @ mta.ones(5, 6)
    with pytest.raises(OpError, match=r"matmul: batch shapes of \(2, 3, 4\) and \(3, 4, 5\)"):
        mta.ones(2, 3, 4) @ mta.ones(3, 4, 5)


def test_dtype_mismatch_is_named() -> None:
    with pytest.raises(TypeError, match="add: dtype mismatch: float32 and float64"):
        mta.ones(2) + mta.ones(2, dtype="float64")
    with pytest.raises(TypeError, match="unsupported dtype 'complex64'"):
        mta.ones(2, dtype="complex64")
    with pytest.raises(TypeError, match="only float tensors can require grad"):
        mta.tensor([1, 2], dtype="int64", requires_grad=True)


def test_device_mismatch_is_named() -> None:
    class FakeCuda(NumpyBackend):
        def __init__(self) -> None:
            super().__init__()
            self.device = Device("cuda", 0)

    on_cpu = mta.ones(2)
    elsewhere = mta.Tensor(np.ones(2, dtype=np.float32), _backend=FakeCuda())
    with pytest.raises(ValueError, match=r"add: tensors are on different devices: cpu and cuda:0"):
        on_cpu + elsewhere
    with pytest.raises(ValueError, match="unknown device 'tpu'"):
        parse_device("tpu")
    assert parse_device("cuda") == "cuda:0" and parse_device("CUDA:2") == Device("cuda", 2)


def test_axis_and_reshape_errors() -> None:
    x = mta.ones(2, 3)
    with pytest.raises(OpError, match=r"sum: axis 2 is out of range for a tensor of shape \(2, 3\)"):
        x.sum(axis=2)
    with pytest.raises(OpError, match=r"cannot reshape a tensor of shape \(2, 3\) \(6 elements\) into \(4, 2\)"):
        x.reshape(4, 2)
    with pytest.raises(OpError, match=r"permute: \(0, 0\) is not a permutation"):
        x.permute(0, 0)
    with pytest.raises(IndexError, match=r"index .* is invalid for shape \(2, 3\)"):
        x[5]
    with pytest.raises(OpError, match=r"concatenate: shapes \(2, 3\) and \(2, 4\) differ outside axis 0"):
        mta.concatenate([x, mta.ones(2, 4)])
    with pytest.raises(OpError, match=r"stack: all tensors need the same shape"):
        mta.stack([x, mta.ones(3, 2)])


def test_layer_shape_errors() -> None:
    with pytest.raises(OpError, match=r"Linear: expected input with last axis 4, got shape \(2, 3\)"):
        nn.Linear(4, 2)(mta.ones(2, 3))
    with pytest.raises(ValueError, match="features must be positive"):
        nn.Linear(0, 2)
    with pytest.raises(OpError, match=r"layer_norm: input of shape \(2, 3\) needs weight and bias of shape \(3,\)"):
        nn.LayerNorm(4)(mta.ones(2, 3))
    with pytest.raises(OpError, match="batch_norm: training needs more than one value per channel"):
        nn.BatchNorm1d(3)(mta.ones(1, 3))
    with pytest.raises(ValueError, match=r"Dropout: p must be in \[0, 1\)"):
        nn.Dropout(1.5)
