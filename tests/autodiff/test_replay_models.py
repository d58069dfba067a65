"""A replayed micro-batch is an eager one, bit for bit: every model of minitorch_accum.models
(the digits MLP and its BatchNorm and dropout variants, the char MLP, the char transformer),
every fusion, float32 and float64, windows that end with a shorter micro-batch (a second guard
key, captured and replayed in its turn), the window's gradients, the losses and the BatchNorm
running statistics all equal."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import minitorch_accum as mta
from minitorch_accum import nn
from minitorch_accum.accum import Accumulator
from minitorch_accum.models import DIGITS_MLP_VARIANTS, CharMLP, CharTransformer, TransformerConfig, digits_mlp
from minitorch_accum.nn import functional as F

WINDOWS = 3  # the short last micro-batch's key is captured, checked and replayed over three windows
ROWS = (4, 4, 4, 3)  # one window: three micro-batches of 4 rows and a shorter one


def _chars(dtype: str, rows: int, rng: np.random.Generator) -> tuple[Any, Any]:
    return rng.integers(0, 11, size=(rows, 8)), rng.integers(0, 11, size=(rows, 8))


def _digits(dtype: str, rows: int, rng: np.random.Generator) -> tuple[Any, Any]:
    return mta.tensor(rng.normal(size=(rows, 64)), dtype=dtype), rng.integers(0, 10, size=rows)


MODELS: dict[str, tuple[Callable[[str], nn.Module], Callable[..., tuple[Any, Any]]]] = {
    "digits_mlp": (lambda dtype: digits_mlp(dtype), _digits),
    **{f"digits_mlp_{name}": ((lambda dtype, kw=kw: digits_mlp(dtype, **kw)), _digits)
       for name, kw in DIGITS_MLP_VARIANTS.items()},
    "char_mlp": (lambda dtype: CharMLP(11, dtype=dtype), _chars),
    "char_transformer": (lambda dtype: CharTransformer(TransformerConfig(vocab_size=11, block_size=8, n_layer=2,
                                                                         n_head=2, n_embd=8), dtype=dtype), _chars),
}


def _train(name: str, fusion: str, dtype: str, replay: bool) -> tuple[list[Any], list[float], Any]:
    build, data = MODELS[name]
    mta.manual_seed(0)
    model = build(dtype)
    rng = np.random.default_rng(1)
    batches = [data(dtype, rows, rng) for rows in ROWS]
    mta.manual_seed(2)  # dropout's masks: the same stream in both runs
    acc = Accumulator(model, steps=len(ROWS), fusion=fusion, accum_dtype=dtype)

    def loss_of(x: Any, y: Any) -> mta.Tensor:
        return F.cross_entropy(model(x), y, reduction="sum")

    step = acc.capture(loss_of) if replay else loss_of
    grads, losses = [], []
    for _ in range(WINDOWS):
        for x, y in batches:
            loss = step(x, y)
            losses.append(float(loss.item()))
            acc.backward(loss, num_items=F.count_items(y))
        grads.append({n: np.array(g) for n, g in ((n, acc.grads()[p]) for n, p in model.named_parameters())})
        acc.zero()
    buffers = {n: np.array(b.numpy()) for n, b in model.named_buffers()}
    return grads, losses, (buffers, step)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("fusion", ["gemm", "leaf", "none"])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_replayed_windows_equal_eager_ones_bit_for_bit(name: str, fusion: str, dtype: str) -> None:
    eager_grads, eager_losses, (eager_buffers, _) = _train(name, fusion, dtype, replay=False)
    grads, losses, (buffers, step) = _train(name, fusion, dtype, replay=True)
    assert losses == eager_losses
    for window, (a, b) in enumerate(zip(eager_grads, grads, strict=True)):
        assert a.keys() == b.keys()
        for param in a:
            assert a[param].dtype == b[param].dtype and np.array_equal(a[param], b[param]), (window, param)
    assert eager_buffers.keys() == buffers.keys()
    for buffer in buffers:
        assert np.array_equal(eager_buffers[buffer], buffers[buffer]), buffer
    # two keys (4 rows, 3 rows), each captured then checked, every later call replayed
    assert step.counts == {"captured": 2, "checked": 2, "replayed": WINDOWS * len(ROWS) - 4, "eager": 0}


def test_dropout_draws_a_new_mask_for_every_replayed_micro_batch() -> None:
    mta.manual_seed(0)
    model = digits_mlp("float64", dropout=0.5)
    x = mta.tensor(np.ones((6, 64)), dtype="float64")
    y = np.zeros(6, dtype=np.int64)
    step = mta.autodiff.capture(lambda x, y: F.cross_entropy(model(x), y, reduction="sum"), model)
    grads = [step(x, y).backward()[model.parameters()[0]] for _ in range(5)]
    assert step.last.outcome == "replayed"
    assert not np.array_equal(grads[3], grads[4])  # the same batch, other masks
