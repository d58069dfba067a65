"""Comparisons and logic on bool tensors: masks without gradients, == kept as identity."""

from __future__ import annotations

import numpy as np
import pytest

import minitorch_accum as mta


def test_and_or_xor_invert_on_bool_tensors() -> None:
    a = mta.tensor(np.array([True, True, False, False]))
    b = mta.tensor(np.array([True, False, True, False]))
    assert (a & b).tolist() == [True, False, False, False]
    assert (a | b).tolist() == [True, True, True, False]
    assert (a ^ b).tolist() == [False, True, True, False]
    assert (~a).tolist() == [False, False, True, True]
    assert (a & True).tolist() == [True, True, False, False] and (False | b).tolist() == b.tolist()
    assert (a & b).dtype == mta.bool and not (a & b).requires_grad
    assert (mta.tensor(np.array([6])) & mta.tensor(np.array([3]))).tolist() == [2]  # ints: bitwise


def test_logic_on_float_tensors_says_to_compare_first() -> None:
    x = mta.ones(2)
    with pytest.raises(TypeError, match=r"&: needs bool \(or integer\) tensors, got float32; .*\(x > 0\)"):
        x & (x > 0)
    with pytest.raises(TypeError, match=r"~: needs bool"):
        _ = ~x


def test_comparisons_make_masks_and_eq_compares_values() -> None:
    x = mta.tensor([1.0, 2.0, 3.0])
    assert (x > 1.5).tolist() == [False, True, True] and (x <= 2.0).tolist() == [True, True, False]
    assert x.eq(2.0).tolist() == [False, True, False] and x.ne(2.0).tolist() == [True, False, True]
    mask = (x > 1.5) & ~x.eq(3.0)
    assert mask.tolist() == [False, True, False]
    # == stays identity: tensors are dict keys (Gradients, optimizer state)
    y = mta.tensor([1.0, 2.0, 3.0])
    assert x == x and x != y and len({x: 1, y: 2}) == 2
