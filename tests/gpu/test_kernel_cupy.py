"""The CUDA kernels through CuPy equal the NumPy reference bit for bit (GPU only).

The same properties as the CPU paths, with arrays copied to the device at the
same alignment offsets, so the 16-byte vector path and the scalar tail are
both exercised there too.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import minitorch_accum.kernels as K
from minitorch_accum.kernels import reference
from minitorch_accum.kernels.dtypes import ACCUMULATE_KINDS, BFLOAT16, FLOAT16, FLOAT32, FLOAT64, NORM_DTYPES
from minitorch_accum.kernels.launch import plan as launch_plan
from tests.kernels.kernel_cases import (
    array,
    assert_same_bits,
    copies,
    offsets,
    pairs,
    reference_step,
    scales,
    seeds,
    sizes,
    with_nonfinite,
)

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def cp():
    return pytest.importorskip("cupy")


def _device(cp, x: np.ndarray | None, offset: int = 0):
    """A device copy of x starting ``offset`` elements into its allocation."""
    if x is None:
        return None
    buffer = cp.empty(x.size + offset + 4, dtype=x.dtype)
    d = buffer[offset : offset + x.size].reshape(x.shape)
    d.set(np.ascontiguousarray(x))
    return d


ACCUMULATE = ("add_scale", "copy_scale", "add_scale_compensated", "copy_scale_compensated")


@pytest.mark.parametrize("kernel", ACCUMULATE)
@given(pair=pairs, n=sizes, offset=offsets, scale=scales, seed=seeds, nonfinite=st.booleans())
def test_cupy_accumulate_matches_reference(cp, kernel, pair, n, offset, scale, seed, nonfinite):
    rng = np.random.default_rng(seed)
    acc = array(rng, n, pair[0], offset)
    comp = array(rng, n, pair[0], offset, magnitude=1e-7)
    g = array(rng, n, pair[1], offset)
    if nonfinite and n:
        with_nonfinite(rng, g)
    d_acc, d_comp, d_g = _device(cp, acc, offset), _device(cp, comp, offset), _device(cp, g, offset)
    flag, d_flag = K.new_flag(acc), K.new_flag(d_acc)
    compensated = kernel.endswith("compensated")
    if compensated:
        getattr(reference, kernel)(acc, comp, g, scale, flag)
        getattr(K, kernel)(d_acc, d_comp, d_g, scale, d_flag)
        assert_same_bits(d_comp.get(), comp, f"{kernel} comp {pair}")
    else:
        getattr(reference, kernel)(acc, g, scale, flag)
        getattr(K, kernel)(d_acc, d_g, scale, d_flag)
    assert_same_bits(d_acc.get(), acc, f"{kernel} {pair} n={n} offset={offset} scale={scale}")
    assert int(d_flag.get()[0]) == int(flag[0]) == int(nonfinite and n > 0)


@given(g_dtype=st.sampled_from([FLOAT16, BFLOAT16]), n=sizes, offset=offsets, scale=scales, seed=seeds)
def test_cupy_cast_add_scale_matches_reference(cp, g_dtype, n, offset, scale, seed):
    rng = np.random.default_rng(seed)
    acc, g = array(rng, n, FLOAT32, offset), array(rng, n, g_dtype, offset)
    d_acc, d_g = _device(cp, acc, offset), _device(cp, g, offset)
    reference.cast_add_scale(acc, g, scale)
    K.cast_add_scale(d_acc, d_g, scale)
    assert_same_bits(d_acc.get(), acc)


def test_cupy_keeps_subnormals_and_never_contracts(cp):
    # CuPy compiles with -ftz=true; the kernels' explicit PTX must keep IEEE subnormals
    acc = np.array([1e-39, -3e-39, 1e-38, 0.0, 1.0], np.float32)
    g = np.array([1e-39, 2e-39, -1e-39, 1e-45, 1e-8], np.float32)
    comp = np.full(5, 1e-40, np.float32)
    for kernel in ("add_scale", "add_scale_compensated"):
        a, c = acc.copy(), comp.copy()
        d_a, d_c, d_g = cp.asarray(a), cp.asarray(c), cp.asarray(g)
        if kernel == "add_scale":
            reference.add_scale(a, g, 0.7)
            K.add_scale(d_a, d_g, 0.7)
        else:
            reference.add_scale_compensated(a, c, g, 0.7)
            K.add_scale_compensated(d_a, d_c, d_g, 0.7)
            assert_same_bits(d_c.get(), c)
        assert_same_bits(d_a.get(), a, kernel)
    halves = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.float16)
    d_out = cp.zeros(halves.size, cp.float32)
    K.copy_scale(d_out, cp.asarray(halves), 1.0)
    assert_same_bits(d_out.get(), halves.astype(np.float32), "every float16")


@pytest.mark.parametrize("mode", ACCUMULATE)
def test_cupy_multi_tensor_with_mixed_dtypes_and_relaunches(cp, mode):
    rng = np.random.default_rng(11)
    kinds = sorted(ACCUMULATE_KINDS, key=str)
    sizes_ = [0, 1, 65_537, 3, 200_001, 4, 70, 65_536]
    compensated = mode.endswith("compensated")
    host, device = [], []
    for i, n in enumerate(sizes_):
        a_dtype, g_dtype = kinds[i % len(kinds)]
        offset = i % 4
        acc, comp, g = array(rng, n, a_dtype, offset), array(rng, n, a_dtype, offset, 1e-7), array(rng, n, g_dtype)
        host.append((acc, comp, g))
        device.append((_device(cp, acc, offset), _device(cp, comp, offset), _device(cp, g)))
    for acc, comp, g in host:
        getattr(reference, mode)(*((acc, comp, g) if compensated else (acc, g)), -0.3)
    accs, comps, gs = (list(x) for x in zip(*device, strict=True))
    with launch_plan.table_limits(max_tensors=3, max_blocks=2):
        getattr(K, f"multi_{mode}")(*((accs, comps, gs) if compensated else (accs, gs)), -0.3)
    for (acc, comp, _), (d_acc, d_comp, _) in zip(host, device, strict=True):
        assert_same_bits(d_acc.get(), acc)
        if compensated:
            assert_same_bits(d_comp.get(), comp)


@given(
    shapes=st.lists(
        st.tuples(st.sampled_from([0, 1, 7, 65_537, 300_000]), st.sampled_from(sorted(NORM_DTYPES, key=str))),
        max_size=6,
    ),
    seed=seeds,
)
def test_cupy_l2_norm_matches_reference(cp, shapes, seed):
    rng = np.random.default_rng(seed)
    xs = [array(rng, n, dtype, int(rng.integers(0, 4))) for n, dtype in shapes]
    value = K.multi_l2_norm([_device(cp, x) for x in xs])
    assert value == pytest.approx(reference.multi_l2_norm(xs), rel=1e-5, abs=1e-30)
    if xs:
        assert K.l2_norm(_device(cp, xs[0])) == pytest.approx(reference.l2_norm(xs[0]), rel=1e-5, abs=1e-30)


@given(
    n=sizes,
    offset=offsets,
    seed=seeds,
    dtype=st.sampled_from([FLOAT32, FLOAT64]),
    momentum=st.sampled_from([0.0, 0.9]),
    nesterov=st.booleans(),
    first_step=st.booleans(),
    decoupled=st.booleans(),
    step=st.integers(1, 100),
)
def test_cupy_optimizer_steps_match_reference(
    cp, n, offset, seed, dtype, momentum, nesterov, first_step, decoupled, step
):
    nesterov = nesterov and momentum > 0
    rng = np.random.default_rng(seed)
    p, g, m = (array(rng, n, dtype, offset) for _ in range(3))
    v = np.abs(array(rng, n, dtype, offset, 0.01))
    d = [_device(cp, x, offset) for x in (p, g, m, v)]
    sgd = dict(lr=0.1, momentum=momentum, weight_decay=0.01, nesterov=nesterov, grad_scale=0.25, first_step=first_step)
    adam = dict(
        lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.01, step=step, grad_scale=1 / 3, decoupled=decoupled
    )
    reference_step("sgd_momentum_step", p, g, m, **sgd)
    reference_step("adamw_step", p, g, m, v, **adam)
    K.sgd_momentum_step(d[0], d[1], d[2], **sgd)
    K.adamw_step(*d, **adam)
    for host, dev in zip((p, m, v), (d[0], d[2], d[3]), strict=True):
        assert_same_bits(dev.get(), host)
    # the multi-tensor kernels, over both dtypes at once
    p2, m2, v2 = copies(p, m, v)
    d2 = [_device(cp, x) for x in (p2, g, m2, v2)]
    other = [_device(cp, array(rng, 5, FLOAT64 if dtype == FLOAT32 else FLOAT32)) for _ in range(4)]
    reference_step("multi_adamw_step", [p2], [g], [m2], [v2], **adam)
    K.multi_adamw_step([d2[0], other[0]], [d2[1], other[1]], [d2[2], other[2]], [d2[3], cp.abs(other[3])], **adam)
    assert_same_bits(d2[0].get(), p2)


def test_cupy_more_than_2_31_elements(cp):
    n = 2**31 + 5  # 64-bit indexing: past the int32 range of a grid-stride index and of a chunk offset
    acc = cp.zeros(n, cp.float32)
    g = cp.ones(n, cp.float32)
    K.add_scale(acc, g, 0.5)
    assert int(cp.count_nonzero(acc != 0.5)) == 0
    K.multi_add_scale([acc], [g], 0.5)
    assert int(cp.count_nonzero(acc != 1.0)) == 0
    assert K.l2_norm(g) == pytest.approx(math.sqrt(n), rel=1e-6)
    del acc, g
    cp.get_default_memory_pool().free_all_blocks()


def test_cupy_flag_and_device_errors(cp):
    d = cp.zeros(3, cp.float32)
    flag = K.new_flag(d)
    assert flag.dtype == cp.int32 and flag.shape == (1,) and int(flag.get()[0]) == 0
    with pytest.raises(TypeError, match=r"add_scale: g is on the host \(NumPy\) but acc is on cuda:\d \(CuPy\)"):
        K.add_scale(d, np.zeros(3, np.float32), 1.0)
    with pytest.raises(ValueError, match=r"add_scale: acc \(shape \(3,\), float32\) and g"):
        K.add_scale(d, cp.zeros(4, cp.float32), 1.0)
