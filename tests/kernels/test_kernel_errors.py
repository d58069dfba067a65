"""Errors are part of the API: every path raises the same exception type, and
the message names the kernel, the arguments' shapes and dtypes."""

from __future__ import annotations

import numpy as np
import pytest

import minitorch_accum.kernels as K
from minitorch_accum.kernels import dispatch
from minitorch_accum.kernels.dtypes import BFLOAT16
from tests.kernels.kernel_cases import CPU_PATHS, on_path


@pytest.mark.parametrize("path", CPU_PATHS)
def test_size_mismatch_names_kernel_shapes_and_dtypes(path):
    with on_path(path), pytest.raises(ValueError) as info:
        K.add_scale(np.zeros((2, 3), np.float32), np.zeros(7, BFLOAT16), 1.0)
    message = str(info.value)
    for part in ("add_scale", "acc (shape (2, 3), float32)", "g (shape (7,), bfloat16)", "number of elements"):
        assert part in message


@pytest.mark.parametrize("path", CPU_PATHS)
def test_unsupported_pair_lists_the_supported_ones(path):
    with (
        on_path(path),
        pytest.raises(
            TypeError,
            match=r"copy_scale: unsupported dtypes acc \(shape \(3,\), "
            r"float16\) with g \(shape \(3,\), float32\); supported",
        ),
    ):
        K.copy_scale(np.zeros(3, np.float16), np.zeros(3, np.float32), 1.0)


@pytest.mark.parametrize("path", CPU_PATHS)
def test_layout_errors(path):
    acc = np.zeros((4, 4), np.float32)
    with on_path(path):
        with pytest.raises(ValueError, match=r"add_scale: acc \(shape \(4, 2\), float32\) must be C-contiguous"):
            K.add_scale(acc[:, ::2], np.zeros(8, np.float32), 1.0)
        frozen = np.zeros(3, np.float32)
        frozen.flags.writeable = False
        with pytest.raises(ValueError, match="is read-only"):
            K.add_scale(frozen, np.zeros(3, np.float32), 1.0)
        with pytest.raises(TypeError, match=r"add_scale_compensated: comp \(shape \(3,\), float64\) must have"):
            K.add_scale_compensated(np.zeros(3, np.float32), np.zeros(3), np.zeros(3, np.float32), 1.0)
        with pytest.raises(TypeError, match=r"flag .* must be an int32 array"):
            K.add_scale(np.zeros(3, np.float32), np.zeros(3, np.float32), 1.0, flag=np.zeros(1))


@pytest.mark.parametrize("path", CPU_PATHS)
def test_cast_add_scale_wants_a_low_precision_gradient(path):
    with on_path(path), pytest.raises(TypeError, match=r"cast_add_scale: g .* must be float16 or bfloat16"):
        K.cast_add_scale(np.zeros(3, np.float32), np.zeros(3, np.float32), 1.0)


@pytest.mark.parametrize("path", CPU_PATHS)
def test_list_errors_name_the_item(path):
    accs = [np.zeros(2, np.float32), np.zeros(3, np.float32)]
    with on_path(path):
        with pytest.raises(ValueError, match="multi_add_scale: accs and gs must have the same length, got 2 and 1"):
            K.multi_add_scale(accs, [np.zeros(2, np.float32)], 1.0)
        with pytest.raises(ValueError, match=r"multi_add_scale: accs\[1\] \(shape \(3,\), float32\) and gs\[1\]"):
            K.multi_add_scale(accs, [np.zeros(2, np.float32), np.zeros(4, np.float32)], 1.0)
        with pytest.raises(TypeError, match="multi_l2_norm: unsupported dtype tensors\\[0\\]"):
            K.multi_l2_norm([np.zeros(3, np.int64)])


@pytest.mark.parametrize("path", CPU_PATHS)
def test_optimizer_errors(path):
    p32 = np.zeros(4, np.float32)
    with on_path(path):
        with pytest.raises(TypeError, match=r"adamw_step: param \(shape \(4,\), float32\) and grad .* float64"):
            K.adamw_step(
                p32,
                np.zeros(4),
                p32.copy(),
                p32.copy(),
                lr=1e-3,
                beta1=0.9,
                beta2=0.999,
                eps=1e-8,
                weight_decay=0.0,
                step=1,
            )
        with pytest.raises(ValueError, match=r"exp_avg_sq .* must have the same number of elements"):
            K.adamw_step(
                p32,
                p32.copy(),
                p32.copy(),
                np.zeros(5, np.float32),
                lr=1e-3,
                beta1=0.9,
                beta2=0.999,
                eps=1e-8,
                weight_decay=0.0,
                step=1,
            )
        with pytest.raises(ValueError, match="step counts from 1"):
            K.adamw_step(
                p32,
                p32.copy(),
                p32.copy(),
                p32.copy(),
                lr=1e-3,
                beta1=0.9,
                beta2=0.999,
                eps=1e-8,
                weight_decay=0.0,
                step=0,
            )
        with pytest.raises(ValueError, match="nesterov needs momentum"):
            K.sgd_momentum_step(p32, p32.copy(), p32.copy(), lr=0.1, momentum=0.0, nesterov=True)


class _FakeDevice:
    id = 0


class _FakeCupyArray:
    """Looks like a CuPy array to the dispatcher without needing CuPy."""

    __module__ = "cupy._core.core"
    __cuda_array_interface__ = None
    device = _FakeDevice()
    dtype = np.dtype(np.float32)
    shape = (3,)


def test_mixing_numpy_and_cupy_names_both_devices():
    with pytest.raises(TypeError, match=r"add_scale: g is on cuda:0 \(CuPy\) but acc is on the host \(NumPy\)"):
        K.add_scale(np.zeros(3, np.float32), _FakeCupyArray(), 1.0)
    with pytest.raises(TypeError, match=r"multi_add_scale: gs\[1\] is on cuda:0 \(CuPy\) but accs\[0\]"):
        K.multi_add_scale([np.zeros(3, np.float32)] * 2, [np.zeros(3, np.float32), _FakeCupyArray()], 1.0)
    with pytest.raises(TypeError, match="add_scale: g must be a NumPy or CuPy array, got list"):
        K.add_scale(np.zeros(3, np.float32), [1.0, 2.0, 3.0], 1.0)


def test_kernel_path_comes_from_the_environment(monkeypatch):
    monkeypatch.delenv("MTA_KERNELS", raising=False)
    assert K.kernel_path() == "native"
    for path in ("reference", "native", "emulated"):
        monkeypatch.setenv("MTA_KERNELS", path)
        assert K.kernel_path() == path
    monkeypatch.setenv("MTA_KERNELS", "fast")
    with pytest.raises(
        ValueError, match="MTA_KERNELS='fast' is not a kernel path; choose one of reference, native, emulated"
    ):
        K.kernel_path()
    with K.use_path("emulated"):
        assert K.kernel_path() == "emulated"
        with K.use_path("reference"):
            assert K.kernel_path() == "reference"
        assert K.kernel_path() == "emulated"
    with pytest.raises(ValueError, match="not a kernel path"), K.use_path("gpu"):
        pass


def test_missing_extension_falls_back_to_reference_with_one_warning(monkeypatch):
    monkeypatch.delenv("MTA_KERNELS", raising=False)
    monkeypatch.setattr(dispatch, "_native_module", None)
    monkeypatch.setattr(dispatch, "_native_import_error", ImportError("no compiler"))
    monkeypatch.setattr(dispatch, "_warned_missing", False)
    assert not K.native_available()
    assert K.kernel_path() == "reference"
    acc = np.zeros(3, np.float32)
    with pytest.warns(K.NativeExtensionMissingWarning, match="no compiler"):
        K.add_scale(acc, np.ones(3, np.float32), 2.0)
    K.add_scale(acc, np.ones(3, np.float32), 2.0)  # no second warning (warnings are errors here)
    assert (acc == 4).all()
    with K.use_path("emulated"), pytest.raises(RuntimeError, match="needs the native extension"):
        K.add_scale(acc, np.ones(3, np.float32), 2.0)
