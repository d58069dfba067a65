"""Adam's and AdamW's arguments (``optim/adam.py``): PyTorch's defaults and the messages of what
they refuse (their update rule against NumPy is in test_optimizers.py)."""

from __future__ import annotations

import pytest

from minitorch_accum import optim


def test_the_defaults_are_pytorchs() -> None:
    adam, adamw = optim.Adam(), optim.AdamW()
    assert (adam.lr, adam.betas, adam.eps, adam.weight_decay) == (1e-3, (0.9, 0.999), 1e-8, 0.0)
    assert (adamw.lr, adamw.betas, adamw.eps, adamw.weight_decay) == (1e-3, (0.9, 0.999), 1e-8, 0.01)


@pytest.mark.parametrize("cls", [optim.Adam, optim.AdamW])
def test_a_rate_given_twice_is_refused_naming_the_optimizer(cls: type) -> None:
    with pytest.raises(TypeError, match=rf"^{cls.__name__}: got a learning rate twice \(0\.1 and lr=0\.2\); the "
                                        r"first argument is either the rate or the parameters$"):
        cls(0.1, lr=0.2)


@pytest.mark.parametrize("betas", [0.9, "ab", (0.9, 0.99, 0.999)], ids=repr)
def test_betas_that_are_not_a_pair_are_refused_as_such(betas: object) -> None:
    with pytest.raises(ValueError, match=r"^betas must be a pair \(beta1, beta2\), got "):
        optim.Adam(betas=betas)
