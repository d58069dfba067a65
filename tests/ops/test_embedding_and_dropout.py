"""Embedding lookup and dropout backward against finite differences."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

import minitorch_accum as mta
from minitorch_accum.nn import functional as F
from minitorch_accum.testing import gradcheck
from minitorch_accum.testing.strategies import arrays
from tests.ops.helpers import leaf


@given(data=st.data())
def test_embedding_gradient_with_repeated_ids(data: st.DataObject) -> None:
    rows, dim = data.draw(st.integers(1, 5)), data.draw(st.integers(1, 4))
    weight = leaf(data.draw(arrays((rows, dim))))
    ids = np.array(data.draw(st.lists(st.integers(0, rows - 1), min_size=1, max_size=7)))
    ids = ids.reshape(-1, 1) if data.draw(st.booleans()) else ids
    scale = np.random.default_rng(4).normal(size=ids.shape + (dim,))
    gradcheck(lambda w: F.embedding(ids, w) * scale, [weight])


def test_dropout_gradient_uses_the_same_mask() -> None:
    x = leaf(np.random.default_rng(5).normal(size=(4, 6)))

    def fn(t: mta.Tensor) -> mta.Tensor:
        return F.dropout(t, 0.4, training=True, rng=np.random.default_rng(11)) * 1.7

    gradcheck(fn, [x])
    out = fn(x).numpy()
    kept = out != 0
    assert 0 < kept.sum() < out.size
    np.testing.assert_allclose(out[kept], (x.numpy() * 1.7 / 0.6)[kept])
