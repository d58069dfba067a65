"""SGD's arguments (``optim/sgd.py``): the ranges it accepts and the messages of what it refuses
(its update rule against NumPy is in test_optimizers.py)."""

from __future__ import annotations

import pytest

from minitorch_accum import optim


def test_dampening_may_be_one_and_no_more() -> None:
    assert optim.SGD(0.1, momentum=0.9, dampening=1.0).dampening == 1.0  # PyTorch's range ends at 1 too
    for bad in (1.5, 2.0):
        with pytest.raises(ValueError, match=rf"^dampening must be in \[0.0, 1.000000000001\), got {bad}$"):
            optim.SGD(0.1, momentum=0.9, dampening=bad)


def test_refusals_say_what_sgd_needs() -> None:
    with pytest.raises(TypeError, match=r"^SGD: lr is required, e\.g\. SGD\(0\.1\) or "
                                        r"SGD\(model\.parameters\(\), lr=0\.1\)$"):
        optim.SGD()
    with pytest.raises(ValueError, match=r"^SGD: nesterov needs momentum > 0 and dampening = 0$"):
        optim.SGD(0.1, momentum=0.9, nesterov=True, dampening=0.1)
    with pytest.raises(TypeError, match=r"^SGD: got a learning rate twice \(0\.1 and lr=0\.2\); the first argument "
                                        r"is either the rate or the parameters$"):
        optim.SGD(0.1, lr=0.2)
