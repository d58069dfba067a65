"""The PyTorch spellings of tensors that used to fail: mta.tensor keeping an array's dtype, to(dtype)
with the dtype positional, float()/double()/half()/bfloat16()/long(), clone, t, float(x), empty."""

from __future__ import annotations

import numpy as np
import pytest

import minitorch_accum as mta


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16", "int32", "int64", "bool", "uint8"])
def test_tensor_keeps_an_arrays_dtype(dtype: str) -> None:
    values = np.array([[1, 0], [3, 4]], dtype=dtype)
    x = mta.tensor(values)
    assert x.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(x.numpy(), values)
    assert mta.tensor(x).dtype == np.dtype(dtype)  # a tensor's too
    assert mta.tensor(values, dtype="float32").dtype == mta.float32  # dtype= still wins


def test_python_data_takes_the_default_float_dtype(restore_default_dtype: None) -> None:
    assert mta.tensor([1.0, 2.0]).dtype == mta.float32 and mta.tensor(0.5).dtype == mta.float32
    assert mta.tensor(np.float64(0.5)).dtype == mta.float64  # a NumPy scalar has a dtype, as in PyTorch
    mta.set_default_dtype(mta.float64)
    assert mta.tensor([[1.0], [2.0]]).dtype == mta.float64
    assert mta.tensor(np.zeros(2, dtype=np.float32)).dtype == mta.float32  # the array's, not the default


def test_a_float64_array_trains_in_float64() -> None:
    x = mta.tensor(np.linspace(0.0, 1.0, 5), requires_grad=True)
    grads = (x * x).sum().backward()
    assert x.dtype == mta.float64 and grads[x].dtype == np.float64
    np.testing.assert_array_equal(grads[x], 2 * np.linspace(0.0, 1.0, 5))


@pytest.fixture
def restore_default_dtype():
    before = mta.get_default_dtype()
    yield
    mta.set_default_dtype(before)


@pytest.mark.parametrize(("call", "dtype"), [
    (lambda x: x.to(mta.float64), mta.float64), (lambda x: x.to("float16"), mta.float16),
    (lambda x: x.to(np.float64), mta.float64), (lambda x: x.to(dtype=mta.bfloat16), mta.bfloat16),
    (lambda x: x.to("cpu", mta.float64), mta.float64), (lambda x: x.to("cpu"), mta.float32),
    (lambda x: x.to(None, "float64"), mta.float64),
    (lambda x: x.to(mta.zeros(1, dtype="float64")), mta.float64),
    (lambda x: x.float(), mta.float32), (lambda x: x.double(), mta.float64), (lambda x: x.half(), mta.float16),
    (lambda x: x.bfloat16(), mta.bfloat16), (lambda x: x.long(), mta.int64), (lambda x: x.to(mta.long), mta.int64),
])
def test_to_and_the_dtype_shorthands(call, dtype) -> None:
    x = mta.tensor([1.5, -2.0, 3.25])
    out = call(x)
    assert out.dtype == dtype and out.device == "cpu"
    np.testing.assert_array_equal(np.asarray(out.numpy(), dtype=np.float64), np.array([1.5, -2.0, 3.25]).astype(dtype))


def test_a_float_cast_is_differentiable_and_no_change_is_the_same_tensor() -> None:
    x = mta.tensor([1.0, 2.0], dtype="float32", requires_grad=True)
    y = x.double()
    assert y.requires_grad and x.to(mta.float32) is x and x.to("cpu") is x and x.float() is x
    assert y.to(None) is y and y.to(None).dtype == mta.float64  # None asks for no change, not the default dtype
    grads = (y * y).sum().backward()
    assert grads[x].dtype == np.float32 and grads[x].tolist() == [2.0, 4.0]


def test_to_refuses_what_is_neither_a_device_nor_a_dtype() -> None:
    x = mta.zeros(2)
    with pytest.raises(TypeError, match=r"to: 'gpu0' is neither a device \('cpu', 'cuda', 'cuda:N'\) nor a dtype"):
        x.to("gpu0")
    with pytest.raises(TypeError, match="to: got two dtypes, float16 and float64"):
        x.to(mta.float64, dtype=mta.float16)
    with pytest.raises(TypeError, match="to: takes at most a device and a dtype, got 3 positional arguments"):
        x.to("cpu", mta.float64, mta.float16)


def test_clone_copies_the_memory_and_passes_the_gradient() -> None:
    values = np.array([1.0, -3.0])
    x = mta.tensor(values, requires_grad=True)
    y = x.clone()
    assert y is not x and not np.shares_memory(y.data, x.data) and y.requires_grad and not y.is_leaf
    y.data[0] = 7.0
    assert x.tolist() == [1.0, -3.0]  # its own memory
    grads = (x.clone() * 3.0).sum().backward()
    assert grads[x].tolist() == [3.0, 3.0]
    assert x.detach().clone().requires_grad is False


def test_t_transposes_a_matrix_and_keeps_a_vector() -> None:
    m = mta.arange(6).reshape(2, 3)
    assert m.t().tolist() == [[0, 3], [1, 4], [2, 5]]
    assert mta.arange(3).t().tolist() == [0, 1, 2] and mta.tensor(2.0).t().item() == 2.0
    with pytest.raises(mta.OpError, match=r"t: expects a tensor of at most 2 axes, got shape \(1, 2, 3\)"):
        mta.zeros(1, 2, 3).t()


def test_float_and_int_of_a_one_element_tensor() -> None:
    assert float(mta.tensor([2.5])) == 2.5 and int(mta.tensor(7, dtype="int64")) == 7
    with pytest.raises(ValueError, match=r"item\(\) needs a tensor with one element"):
        float(mta.zeros(2))


def test_empty_has_the_shape_dtype_and_device_asked_for() -> None:
    x = mta.empty(2, 3)
    assert x.shape == (2, 3) and x.dtype == mta.get_default_dtype() and x.device == "cpu" and not x.requires_grad
    assert mta.empty((4,), dtype=mta.int64).dtype == mta.int64
    assert mta.empty(3, dtype="float64", requires_grad=True).requires_grad
    with pytest.raises(TypeError, match="only float tensors can require grad"):
        mta.empty(2, dtype="int32", requires_grad=True)
