"""Where an optimizer reads gradients from (``optim/grad_source.py``): a source whose window is
not a GradientWindow is named."""

from __future__ import annotations

import numpy as np
import pytest

from minitorch_accum import nn, optim


class HandsOutADict:
    def gradient_window(self) -> dict:
        return {}


def test_a_gradient_window_of_another_type_is_refused_naming_the_source() -> None:
    model = nn.Sequential(nn.Linear(3, 2, rng=np.random.default_rng(0)))
    with pytest.raises(TypeError, match=r"^HandsOutADict.gradient_window\(\) must return a GradientWindow$"):
        optim.SGD(0.1).step(model, HandsOutADict())
