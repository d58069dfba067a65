"""The hyperparameter checks every constructor makes (``optim/hyperparameter_checks.py``): what a
flag accepts."""

from __future__ import annotations

import re

import numpy as np
import pytest

from minitorch_accum import optim


@pytest.mark.parametrize(("value", "means"), [(True, True), (False, False), (np.bool_(False), False), (1, True),
                                              (0, False), (np.int64(1), True)], ids=repr)
def test_a_flag_is_a_bool_or_the_ints_0_and_1(value: object, means: bool) -> None:
    assert optim.SGD(0.1, momentum=0.9, nesterov=value).nesterov is means


@pytest.mark.parametrize("value", [2, -1, np.int64(2), 0.0, 1.0, None], ids=repr)
def test_other_numbers_are_not_flags(value: object) -> None:
    with pytest.raises(ValueError, match=rf"^nesterov must be True or False, got {re.escape(repr(value))}$"):
        optim.SGD(0.1, momentum=0.9, nesterov=value)
