"""A power-of-two loss scale changes no bit of an optimizer step taken from the window.

The scaler seeds backward with 2^e and folds 2^-e into the accumulation kernels; scaling
by a power of two is exact (no value here comes near overflow or the subnormals), so the
window's raw sums are the same bits as without a scaler, and the factor the optimizer
reads from ``gradient_window()`` (1/N items or 1/k) must be the same too: the unscale
is already done and must not be applied again. Checked through ``opt.step(model, acc)``
(the fused step folds the window's factor in), over two windows whose scale differs.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import minitorch_accum as mta
from minitorch_accum import optim
from minitorch_accum.accum import Accumulator, DynamicLossScaler
from minitorch_accum.nn import functional as F
from tests.accum.helpers import SIZES, data, mlp, split

OPTIMIZERS: dict[str, Callable[[], optim.Optimizer]] = {
    "sgd": lambda: optim.SGD(0.1),
    "sgd-momentum": lambda: optim.SGD(0.1, momentum=0.9),
    "sgd-nesterov": lambda: optim.SGD(0.1, momentum=0.9, nesterov=True, weight_decay=0.01),
    "adamw": lambda: optim.AdamW(lr=0.01, weight_decay=0.1),
}
WINDOWS = 2
INIT_SCALE = 2.0**10


def train(dtype: str, reduction: str, fusion: str, make_optimizer: Callable[[], optim.Optimizer],
          scaler: DynamicLossScaler | None) -> tuple[dict[str, np.ndarray], optim.Optimizer]:
    """WINDOWS optimizer steps over uneven micro-batches; the parameters by name."""
    model = mlp(dtype)
    opt = make_optimizer()
    acc = Accumulator(model, steps=len(SIZES), reduction=reduction, fusion=fusion, accum_dtype=dtype,
                      loss_scaler=scaler)
    for window in range(WINDOWS):
        x, y = data(seed=20 + window)
        for part in split(len(y), SIZES):
            logits = model(mta.tensor(x[part], dtype=dtype))
            if reduction == "items":
                acc.backward(F.cross_entropy(logits, y[part], reduction="sum"), num_items=len(y[part]))
            else:
                acc.backward(F.cross_entropy(logits, y[part]))
        opt.step(model, acc)
        acc.zero()
    return {name: p.numpy() for name, p in model.named_parameters()}, opt


@pytest.mark.parametrize("optimizer", list(OPTIMIZERS))
@pytest.mark.parametrize("fusion", ["leaf", "gemm", "none"])
@pytest.mark.parametrize("reduction", ["items", "mean"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_power_of_two_loss_scale_leaves_the_optimizer_step_bit_identical(dtype: str, reduction: str, fusion: str,
                                                                           optimizer: str) -> None:
    # growth_interval=1: the scale doubles after each clean window, so the second window
    # runs at 2^11 and must still unscale by exactly its own scale
    scaler = DynamicLossScaler(init_scale=INIT_SCALE, growth_interval=1)
    scaled, scaled_opt = train(dtype, reduction, fusion, OPTIMIZERS[optimizer], scaler)
    plain, plain_opt = train(dtype, reduction, fusion, OPTIMIZERS[optimizer], None)
    assert scaler.scale == INIT_SCALE * 2**WINDOWS and not scaler.events  # it scaled, nothing overflowed
    assert scaled_opt.step_count == plain_opt.step_count == WINDOWS
    for name, values in plain.items():
        assert values.dtype == np.dtype(dtype)
        assert np.array_equal(scaled[name], values), name
