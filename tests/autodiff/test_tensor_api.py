"""The Tensor's facts and the PyTorch habits it answers: size, grad, numel."""

from __future__ import annotations

import json

import numpy as np
import pytest

import minitorch_accum as mta


def test_size_is_burns_element_count_and_calling_it_says_what_to_use() -> None:
    x = mta.zeros(2, 3)
    assert x.size == 6 and isinstance(x.size, int) and x.numel() == 6
    assert x.size + 1 == 7 and json.dumps(x.size) == "6" and np.zeros(x.size).shape == (6,)
    with pytest.raises(TypeError, match=r"Tensor.size is the number of elements \(6\).*use x.shape for PyTorch's"):
        x.size()
    with pytest.raises(TypeError, match=r"x.shape\[d\] for x.size\(d\)"):
        x.size(0)


def test_grad_attribute_points_to_the_gradients_container() -> None:
    w = mta.tensor([1.0, 2.0], requires_grad=True)
    grads = (w * w).sum().backward()
    message = r"gradients are not stored on tensors .* grads = loss.backward\(\); grads\[t\]"
    with pytest.raises(AttributeError, match=message):
        _ = w.grad
    with pytest.raises(AttributeError, match=message):
        w.grad = np.zeros(2)
    assert not hasattr(w, "grad")
    np.testing.assert_array_equal(grads[w], [2.0, 4.0])
