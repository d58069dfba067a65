"""Fused SGD-momentum and AdamW steps: every CPU path equals the NumPy reference bit for
bit; the reference follows PyTorch (tests/equivalence/test_oracle_kernels.py)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import minitorch_accum.kernels as K
from minitorch_accum.kernels.dtypes import FLOAT32, FLOAT64
from tests.kernels.kernel_cases import (
    CPU_PATHS,
    array,
    assert_same_bits,
    copies,
    offsets,
    on_path,
    reference_step,
    seeds,
    sizes,
)

dtypes = st.sampled_from([FLOAT32, FLOAT64])
sgd_settings = st.fixed_dictionaries(
    {
        "lr": st.sampled_from([0.1, 1e-3, 0.37]),
        "momentum": st.sampled_from([0.0, 0.9, 0.5]),
        "dampening": st.sampled_from([0.0, 0.1]),
        "weight_decay": st.sampled_from([0.0, 1e-2]),
        "grad_scale": st.sampled_from([1.0, 0.125, 1 / 3, 1 / 65536]),
        "first_step": st.booleans(),
        "nesterov": st.booleans(),
    }
).filter(lambda s: not s["nesterov"] or (s["momentum"] > 0 and s["dampening"] == 0))
adam_settings = st.fixed_dictionaries(
    {
        "lr": st.sampled_from([1e-3, 0.1]),
        "beta1": st.sampled_from([0.9, 0.5]),
        "beta2": st.sampled_from([0.999, 0.95]),
        "eps": st.sampled_from([1e-8, 1e-6]),
        "weight_decay": st.sampled_from([0.0, 0.01]),
        "step": st.integers(1, 1000),
        "grad_scale": st.sampled_from([1.0, 0.25, 1 / 3]),
        "decoupled": st.booleans(),
    }
)


def _state(rng, n, dtype, offset):
    p = array(rng, n, dtype, offset)
    g = array(rng, n, dtype, offset)
    m = array(rng, n, dtype, offset, magnitude=0.1)
    v = np.abs(array(rng, n, dtype, offset, magnitude=0.01))
    return p, g, m, v


@pytest.mark.parametrize("path", CPU_PATHS)
@given(n=sizes, offset=offsets, seed=seeds, dtype=dtypes, settings=sgd_settings)
def test_sgd_momentum_step_matches_reference(path, n, offset, seed, dtype, settings):
    p, g, buf, _ = _state(np.random.default_rng(seed), n, dtype, offset)
    p_ref, buf_ref = copies(p, buf, offset=offset)
    reference_step("sgd_momentum_step", p_ref, g, buf_ref, **settings)
    with on_path(path):
        K.sgd_momentum_step(p, g, buf, **settings)
    assert_same_bits(p, p_ref, f"param {settings}")
    assert_same_bits(buf, buf_ref, f"momentum_buf {settings}")


@pytest.mark.parametrize("path", CPU_PATHS)
@given(n=sizes, offset=offsets, seed=seeds, dtype=dtypes, settings=adam_settings)
def test_adamw_step_matches_reference(path, n, offset, seed, dtype, settings):
    p, g, m, v = _state(np.random.default_rng(seed), n, dtype, offset)
    p_ref, m_ref, v_ref = copies(p, m, v, offset=offset)
    reference_step("adamw_step", p_ref, g, m_ref, v_ref, **settings)
    with on_path(path):
        K.adamw_step(p, g, m, v, **settings)
    assert_same_bits(p, p_ref, f"param {settings}")
    assert_same_bits(m, m_ref, "exp_avg")
    assert_same_bits(v, v_ref, "exp_avg_sq")


@pytest.mark.parametrize("path", CPU_PATHS)
@given(seed=seeds, sgd=sgd_settings, adam=adam_settings)
def test_multi_steps_equal_per_tensor_steps_across_dtypes(path, seed, sgd, adam):
    rng = np.random.default_rng(seed)
    sizes_ = [3, 70_000, 0, 129, 5]
    states = [_state(rng, n, [FLOAT32, FLOAT64][i % 2], i % 3) for i, n in enumerate(sizes_)]
    expected = [copies(*s) for s in states]
    for p, g, m, v in expected:
        reference_step("sgd_momentum_step", p, g, m, **sgd)
        reference_step("adamw_step", p, g, m, v, **adam)
    params, grads, ms, vs = (list(c) for c in zip(*states, strict=True))
    with on_path(path):
        K.multi_sgd_momentum_step(params, grads, ms, **sgd)
        K.multi_adamw_step(params, grads, ms, vs, **adam)
    for (p, _, m, v), (pe, _, me, ve) in zip(states, expected, strict=True):
        assert_same_bits(p, pe)
        assert_same_bits(m, me)
        assert_same_bits(v, ve)


@pytest.mark.parametrize("path", CPU_PATHS)
def test_sgd_without_momentum_needs_no_buffer(path):
    p = np.ones(10, np.float32)
    with on_path(path):
        K.sgd_momentum_step(p, np.full(10, 2, np.float32), None, lr=0.5, momentum=0.0)
        K.multi_sgd_momentum_step([p], [np.full(10, 2, np.float32)], None, lr=0.5, momentum=0.0)
    assert (p == -1).all()
    with on_path(path), pytest.raises(ValueError, match="momentum_buf is required when momentum != 0"):
        K.sgd_momentum_step(p, p.copy(), None, lr=0.5, momentum=0.9)


def test_grad_scale_folds_the_window_normalization():
    # a step on the sum of k micro-batch gradients with grad_scale=1/k equals a step on their mean
    g_sum = np.array([4.0, 8.0, -2.0], np.float32)
    p1, p2 = np.ones(3, np.float32), np.ones(3, np.float32)
    K.sgd_momentum_step(p1, g_sum, None, lr=0.1, momentum=0.0, grad_scale=0.25)
    K.sgd_momentum_step(p2, g_sum / 4, None, lr=0.1, momentum=0.0)
    assert_same_bits(p1, p2)
