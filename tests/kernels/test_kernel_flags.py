"""The fused non-finite flag: set by inf/nan in g, never by finite values, never cleared."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given

import minitorch_accum.kernels as K
from tests.kernels.kernel_cases import CPU_PATHS, array, offsets, on_path, pairs, seeds, sizes, with_nonfinite

KERNELS = ("add_scale", "copy_scale", "add_scale_compensated", "copy_scale_compensated")


def _call(kernel, acc, g, flag, scale=0.5):
    if kernel.endswith("compensated"):
        getattr(K, kernel)(acc, np.zeros_like(acc), g, scale, flag=flag)
    else:
        getattr(K, kernel)(acc, g, scale, flag=flag)


@pytest.mark.parametrize("path", CPU_PATHS)
@pytest.mark.parametrize("kernel", KERNELS)
@given(pair=pairs, n=sizes, offset=offsets, seed=seeds)
def test_nonfinite_gradient_sets_flag(path, kernel, pair, n, offset, seed):
    if n == 0:
        return
    rng = np.random.default_rng(seed)
    acc = array(rng, n, pair[0], offset)
    g = with_nonfinite(rng, array(rng, n, pair[1], offset), count=int(rng.integers(1, 3)))
    flag = K.new_flag(acc)
    with on_path(path):
        _call(kernel, acc, g, flag)
    assert flag.dtype == np.int32 and flag.shape == (1,)
    assert flag[0] == 1


@pytest.mark.parametrize("path", CPU_PATHS)
@pytest.mark.parametrize("kernel", KERNELS)
@given(pair=pairs, n=sizes, offset=offsets, seed=seeds)
def test_finite_gradient_leaves_flag_clear(path, kernel, pair, n, offset, seed):
    rng = np.random.default_rng(seed)
    acc = array(rng, n, pair[0], offset)
    g = array(rng, n, pair[1], offset)
    flag = K.new_flag(acc)
    with on_path(path):
        # a huge scale overflows s * g to inf: the flag reports g, not the product
        _call(kernel, acc, g, flag, scale=1e38)
    assert flag[0] == 0


@pytest.mark.parametrize("path", CPU_PATHS)
def test_flag_is_never_cleared(path):
    acc = np.zeros(100, np.float32)
    flag = K.new_flag(acc)
    flag[0] = 1
    with on_path(path):
        K.add_scale(acc, np.ones(100, np.float32), 1.0, flag=flag)
        K.multi_add_scale([acc], [np.ones(100, np.float32)], 1.0, flag=flag)
    assert flag[0] == 1


@pytest.mark.parametrize("path", CPU_PATHS)
def test_multi_tensor_flag_sees_any_tensor(path):
    accs = [np.zeros(n, np.float32) for n in (10, 70000, 3)]
    gs = [np.ones(n, np.float32) for n in (10, 70000, 3)]
    flag = K.new_flag(accs[0])
    with on_path(path):
        K.multi_add_scale(accs, gs, 1.0, flag=flag)
        assert flag[0] == 0
        gs[1][69999] = np.nan
        K.multi_add_scale(accs, gs, 1.0, flag=flag)
    assert flag[0] == 1


def test_new_flag_is_zero_int32_on_host():
    flag = K.new_flag(np.zeros(3))
    assert flag.dtype == np.int32 and flag.shape == (1,) and flag[0] == 0
    with pytest.raises(TypeError, match="new_flag"):
        K.new_flag([1, 2])
