"""The precision study: each way of accumulating measured against the exact sum of what it added."""

from __future__ import annotations

import numpy as np
import pytest

from minitorch_accum.data import DataLoader, load_digits
from minitorch_accum.models import digits_mlp
from minitorch_accum.observe.precision import (
    INPUT_ROUNDING,
    ROWS,
    STOCHASTIC,
    accumulation_errors,
    default_ks,
    micro_batch_gradients,
)

EPS64 = float(np.finfo(np.float64).eps)
COMPENSATED, PLAIN = "float32 compensated (Neumaier)", "float32"


def planted(count: int, size: int = 512, seed: int = 0):
    """One large micro-batch gradient, then many of magnitudes spread over four decades: what
    a plain float32 sum loses the low bits of, and a compensated one keeps."""
    rng = np.random.default_rng(seed)
    yield rng.normal(size=size) * 1e4
    for _ in range(count - 1):
        yield rng.normal(size=size) * 10.0 ** rng.uniform(-3, 1)


def test_compensated_float32_is_ten_times_closer_than_plain_float32_at_k_1024() -> None:
    study = accumulation_errors(planted(1024), default_ks())
    assert study.ks == default_ks() and study.ks[-1] == 1024
    plain, compensated = study.row(PLAIN).errors[1024], study.row(COMPENSATED).errors[1024]
    assert compensated > 0 and plain >= 10 * compensated
    # compensation keeps the error at the final rounding, whatever k is
    assert max(study.row(COMPENSATED).errors.values()) <= float(np.finfo(np.float32).eps)
    # the plain sum's error grows with k
    assert study.row(PLAIN).errors[1024] > 4 * study.row(PLAIN).errors[4]


def test_float64_errs_by_about_its_epsilon() -> None:
    study = accumulation_errors(planted(256, seed=3), default_ks(256))
    errors = study.row("float64").errors
    assert errors[1] == 0.0  # the first write copies
    assert 0 < errors[2] <= EPS64  # one rounding of each element
    assert all(e <= 50 * EPS64 for e in errors.values())


def test_a_bfloat16_buffer_loses_what_casting_into_float32_keeps() -> None:
    rng = np.random.default_rng(1)
    study = accumulation_errors((rng.normal(size=2048) + 0.2 for _ in range(256)), [1, 16, 256])
    bf16, cast = study.row("bf16 -> bf16").errors, study.row("bf16 -> float32 (cast_add_scale)").errors
    assert bf16[256] > 100 * cast[256] and bf16[256] > bf16[16]
    assert cast[256] <= float(np.finfo(np.float32).eps) * 256
    # bfloat16's own rounding of each gradient is about its unit roundoff, before any sum
    assert 5e-4 < study.row(INPUT_ROUNDING).errors[1] < 4e-3


def test_stochastic_rounding_errs_like_a_random_walk_where_rounding_to_nearest_stalls() -> None:
    # one large gradient, then small ones with a mean, each under half a unit of the running sum
    # (bf16's unit at 100 is 0.5): to nearest every one is lost; a noisier addend would dither the
    # rounding itself and spare round-to-nearest most of that bias
    def gradients(count: int, seed: int):
        rng = np.random.default_rng(seed)
        yield rng.normal(size=4096) * 100
        for _ in range(count - 1):
            yield rng.normal(size=4096) * 0.05 + 0.05

    study = accumulation_errors(gradients(1024, 4), [1, 64, 1024], seed=7)
    nearest, stochastic = study.row("bf16 -> bf16"), study.row(STOCHASTIC)
    assert nearest.errors[1024] > 6 * stochastic.errors[1024]
    assert stochastic.errors[1] == 0 and stochastic.expected[1] == 0  # the first write copies a bf16 value
    # the measured error is its expectation: 4096 elements, each an independent walk
    for k in (64, 1024):
        assert 0.9 < stochastic.errors[k] / stochastic.expected[k] < 1.1
    # about sqrt(k) units: 16 times the micro-batches, about 4 times the error (a sum that grows like k
    # halves each unit's relative size per doubling, so the relative error grows no faster than sqrt(k))
    assert stochastic.errors[1024] < 5 * stochastic.errors[64]
    assert study.as_dict()["rows"][1]["expected"]["1024"] == stochastic.expected[1024]
    # the seed decides the bits, not the error's size
    other = accumulation_errors(gradients(64, 4), [64], seed=8)
    assert other.row(STOCHASTIC).errors[64] != stochastic.errors[64]


def test_sums_that_every_dtype_holds_exactly_have_no_error() -> None:
    # small integers: every partial sum is exact in bfloat16, float32 and float64 alike, so an
    # error here would be the measurement's, not the accumulation's
    rng = np.random.default_rng(2)
    study = accumulation_errors((rng.integers(-3, 4, size=300).astype(np.float64) for _ in range(32)), [1, 8, 32])
    for row in study.rows:
        assert all(e == 0.0 for e in row.errors.values()), row


def test_the_study_runs_on_a_model_s_micro_batch_gradients() -> None:
    train, _ = load_digits().split(0.8, seed=0)
    model = digits_mlp("float64")
    loader = DataLoader(train, 8, shuffle=True, seed=0)
    study = accumulation_errors(micro_batch_gradients(model, (loader.batch(0, i) for i in range(len(loader)))),
                                [1, 2, 4, 8])
    assert [r.name for r in study.rows] == [name for name, _, _ in ROWS] + [INPUT_ROUNDING]
    assert all(e <= 10 * EPS64 for e in study.row("float64").errors.values())
    assert "k=8" in study.table() and study.as_dict()["rows"][0]["errors"]["8"] == study.rows[0].errors[8]


def test_too_few_gradients_or_no_k_is_refused() -> None:
    with pytest.raises(ValueError, match="needs 8 micro-batch gradients, got 3"):
        accumulation_errors(planted(3), [1, 8])
    with pytest.raises(ValueError, match="positive"):
        accumulation_errors(planted(3), [0])
