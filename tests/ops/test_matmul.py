"""Matrix products: 2-D, batched and with vector operands, against finite differences."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from minitorch_accum.testing import gradcheck
from minitorch_accum.testing.strategies import arrays, matmul_shapes
from tests.ops.helpers import leaf


@given(data=st.data())
def test_matmul_gradient_2d_and_batched(data: st.DataObject) -> None:
    shape_a, shape_b = data.draw(matmul_shapes())
    a = leaf(data.draw(arrays(shape_a)))
    b = leaf(data.draw(arrays(shape_b)))
    gradcheck(lambda x, y: x @ y, [a, b])


def test_matmul_with_vectors() -> None:
    rng = np.random.default_rng(0)
    m, v = leaf(rng.normal(size=(3, 4))), leaf(rng.normal(size=4))
    gradcheck(lambda a, b: a @ b, [m, v])
    u = leaf(rng.normal(size=3))
    gradcheck(lambda a, b: a @ b, [u, m])
    gradcheck(lambda a, b: a @ b, [leaf(rng.normal(size=4)), v])
