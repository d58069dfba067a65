"""Layer norm and batch norm backward against finite differences."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

import minitorch_accum as mta
from minitorch_accum.nn import functional as F
from minitorch_accum.testing import gradcheck
from minitorch_accum.testing.strategies import arrays, shapes
from tests.ops.helpers import leaf


@given(data=st.data())
def test_layer_norm_gradient(data: st.DataObject) -> None:
    shape = data.draw(shapes(min_dims=1, max_dims=3, min_side=2))
    x = leaf(data.draw(arrays(shape)))
    d = shape[-1]
    w = leaf(data.draw(arrays((d,), 0.5, 1.5)))
    b = leaf(data.draw(arrays((d,))))
    weights = np.random.default_rng(2).normal(size=shape)
    assume(np.all(np.std(x.data, axis=-1) > 1e-2))
    gradcheck(lambda t, ww, bb: F.layer_norm(t, ww, bb) * weights, [x, w, b], atol=1e-5)


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("shape", [(5, 3), (4, 2, 3)])
def test_batch_norm_gradient(training: bool, shape: tuple[int, ...]) -> None:
    rng = np.random.default_rng(3)
    x = leaf(rng.normal(size=shape))
    c = shape[1]
    w, b = leaf(rng.uniform(0.5, 1.5, c)), leaf(rng.normal(size=c))
    weights = rng.normal(size=shape)

    def fn(t: mta.Tensor, ww: mta.Tensor, bb: mta.Tensor) -> mta.Tensor:
        # fresh statistics each call: finite differences must not see running-stat updates
        mean, var = np.zeros(c), np.ones(c)
        return F.batch_norm(t, ww, bb, mean + 0.1, var * 1.5, training=training) * weights

    gradcheck(fn, [x, w, b], atol=1e-5)
