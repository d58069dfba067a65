"""The weight gradients' GEMMs on a pool helper while backward goes on (2 threads or more): the same
bits as one thread, the arena settled before anything reads it, and no overlap where something
watches the writes as they happen."""

from __future__ import annotations

import numpy as np
import pytest

import minitorch_accum as mta
import minitorch_accum.kernels as K
from minitorch_accum.accum import Accumulator
from minitorch_accum.autodiff.graph import apply
from minitorch_accum.backend.blas import native_gemm
from minitorch_accum.models import CharTransformer, TransformerConfig
from minitorch_accum.nn import functional as F
from minitorch_accum.observe import AccumulationTrace
from minitorch_accum.ops.function import Function

pytestmark = pytest.mark.skipif(native_gemm() is None, reason="needs the native module and NumPy's OpenBLAS")

SIZES = (16, 16, 5)  # a shorter last micro-batch


@pytest.fixture
def starts(monkeypatch):
    """How many weight GEMMs each run handed to a helper."""
    handed: list[bool] = []
    real = K.gemm_start

    def spy(*args):
        handed.append(real(*args))
        return handed[-1]
    monkeypatch.setattr(K, "gemm_start", spy)
    return handed


def _window(threads: int, dtype: str = "float32", replay: bool = False, trace: bool = False) -> dict[str, np.ndarray]:
    K.set_native_threads(threads)
    try:
        rng = np.random.default_rng(0)
        mta.manual_seed(0)  # the model's initial values come from the default generator
        config = TransformerConfig(vocab_size=40, block_size=32, n_layer=2, n_head=4, n_embd=64)
        model = CharTransformer(config, dtype=dtype)
        ids = rng.integers(0, 40, size=(sum(SIZES), 32))
        acc = Accumulator(model, steps=len(SIZES), fusion="gemm")
        if trace:
            acc.trace = AccumulationTrace()
        step = acc.capture(lambda x, y: F.cross_entropy(model(x), y, reduction="sum")) if replay else None
        start = 0
        for size in SIZES:
            x, y = mta.tensor(ids[start:start + size]), mta.tensor(np.roll(ids[start:start + size], -1, axis=1))
            loss = step(x, y) if step is not None else F.cross_entropy(model(x), y, reduction="sum")
            acc.backward(loss, num_items=size * 32)
            assert acc.store._in_flight is None  # settled before backward returned
            start += size
        return {name: np.array(acc.grads()[p]) for name, p in model.named_parameters()}
    finally:
        K.set_native_threads(0)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("replay", [False, True])
def test_a_window_with_gemms_in_the_background_is_one_threads_bit_for_bit(starts, dtype: str, replay: bool) -> None:
    one = _window(1, dtype, replay)
    assert not any(starts)  # one thread: nothing handed over
    two = _window(2, dtype, replay)
    assert sum(starts) >= 5 * len(SIZES)  # most weight gradients went to the helper (the tied head too)
    assert one.keys() == two.keys()
    for name in one:
        np.testing.assert_array_equal(one[name], two[name], err_msg=name)


def test_a_traced_window_writes_each_gemm_before_it_records_it(starts) -> None:
    """The recorder times each write as it happens: nothing runs in the background then."""
    traced = _window(2, trace=True)
    assert starts == []
    plain = _window(1)
    for name in plain:
        np.testing.assert_array_equal(traced[name], plain[name], err_msg=name)


class _Boom(Function):
    @staticmethod
    def forward(ctx, x):
        return x.copy()

    @staticmethod
    def backward(ctx, grad):
        raise RuntimeError("boom in backward")


def test_a_backward_that_raises_leaves_no_gemm_running(starts) -> None:
    K.set_native_threads(2)
    try:
        rng = np.random.default_rng(1)
        first, second = mta.nn.Linear(256, 256, rng=rng), mta.nn.Linear(256, 256, rng=rng)
        model = mta.nn.Sequential(first, second)
        acc = Accumulator(model, steps=2, fusion="gemm")
        x = mta.tensor(rng.standard_normal((1024, 256)).astype(np.float32))
        with pytest.raises(RuntimeError, match="boom in backward"):
            acc.backward(second(apply(_Boom, first(x))).sum(), num_items=1024)
        assert starts and starts[-1]  # second's weight GEMM was in the background when the op below raised
        assert acc.store._in_flight is None
        assert acc.store.poisoned
        view = dict(acc.store.views())[second.weight]
        h = first(x).numpy().astype(np.float64)
        # each element sums 1024 signed terms: bound the error by their magnitudes, not the sum
        exact, magnitude = h.sum(axis=0)[:, None] * acc.store._scale, np.abs(h).sum(axis=0)[:, None] * acc.store._scale
        assert np.all(np.abs(view - exact) <= 1e-5 * magnitude)
    finally:
        K.set_native_threads(0)


def _shared_weight_window(threads: int) -> np.ndarray:
    """A weight that is both a GEMM's factor and an elementwise operand: the GEMM's write and the
    kernel's add land on the same view, one right after the other."""
    K.set_native_threads(threads)
    try:
        rng = np.random.default_rng(2)
        layer = mta.nn.Linear(512, 512, bias=False, rng=rng)
        acc = Accumulator(layer, steps=2, fusion="gemm")
        for seed in (3, 4):
            x = mta.tensor(np.random.default_rng(seed).standard_normal((1024, 512)).astype(np.float32))
            # backward writes the GEMM's product first, then the two halves of (W * W)'s gradient
            acc.backward((layer.weight * layer.weight).sum() + layer(x).sum(), num_items=1024)
        return np.array(acc.grads()[layer.weight])
    finally:
        K.set_native_threads(0)


def test_a_write_into_a_view_a_background_gemm_writes_waits_for_it(starts) -> None:
    one = _shared_weight_window(1)
    two = _shared_weight_window(2)
    assert any(starts)
    np.testing.assert_array_equal(one, two)
