"""``reduction="mean_nominal"``: micro-batch means divided by the configured k, even on a
partial window (Lightning's rule, and the Hugging Face Trainer's before its 2024 fix)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import minitorch_accum as mta
from minitorch_accum import nn, optim
from minitorch_accum.accum import FUSIONS, Accumulator
from minitorch_accum.accum.normalization import micro_batch_loss_reduction, window_scale
from minitorch_accum.data import ArrayDataset, DataLoader
from minitorch_accum.nn import functional as F
from minitorch_accum.train import LearnerBuilder
from tests.accum.helpers import data, max_difference, mlp, split, window_grads


def mean_loss(model: nn.Module, x: np.ndarray, y: np.ndarray) -> mta.Tensor:
    return F.cross_entropy(model(mta.tensor(x, dtype="float64")), y)


def lightning_gradient(model: nn.Module, x: np.ndarray, y: np.ndarray, parts: list[slice], k: int) -> dict:
    """What Lightning computes: backward of (micro-batch mean loss) / accumulate_grad_batches, summed."""
    total: dict[str, np.ndarray] = {}
    for part in parts:
        grads = mean_loss(model, x[part], y[part]).backward()
        for name, p in model.named_parameters():
            total[name] = total.get(name, 0.0) + np.asarray(grads[p]) / k
    return total


@pytest.mark.parametrize("fusion", FUSIONS)
@pytest.mark.parametrize("sizes", [(5, 5, 5, 5), (5, 5, 5), (7, 1, 4)], ids=["full", "partial", "uneven-partial"])
def test_mean_nominal_divides_by_the_configured_k_whatever_the_window_holds(fusion: str, sizes: tuple) -> None:
    model = mlp("float64")
    x, y = data(sum(sizes))
    parts = split(sum(sizes), sizes)
    acc = Accumulator(model, steps=4, reduction="mean_nominal", fusion=fusion, accum_dtype="float64")
    for part in parts:
        acc.backward(mean_loss(model, x[part], y[part]))
    assert acc.window_scale() == 0.25
    assert max_difference(window_grads(acc, model), lightning_gradient(model, x, y, parts, 4)) <= 1e-13


def test_mean_nominal_equals_mean_on_a_full_window_and_is_held_over_k_of_it_on_a_partial_one() -> None:
    x, y = data(15)
    parts = split(15, (5, 5, 5))
    results = {}
    for reduction, steps in (("mean", 3), ("mean_nominal", 3), ("mean_nominal", 4)):
        model = mlp("float64")
        acc = Accumulator(model, steps=steps, reduction=reduction, accum_dtype="float64")
        for part in parts:
            acc.backward(mean_loss(model, x[part], y[part]))
        results[reduction, steps] = window_grads(acc, model)
    assert max_difference(results["mean", 3], results["mean_nominal", 3]) <= 1e-15
    three_quarters = {n: 0.75 * g for n, g in results["mean", 3].items()}
    assert max_difference(results["mean_nominal", 4], three_quarters) <= 1e-15


def test_the_fused_optimizer_steps_fold_the_nominal_scale() -> None:
    x, y = data(9)
    parts = split(9, (4, 5))
    for make in (lambda: optim.AdamW(lr=0.01, weight_decay=0.1), lambda: optim.SGD(0.1, momentum=0.9)):
        fused, by_hand = mlp("float64"), mlp("float64")
        acc = Accumulator(fused, steps=3, reduction="mean_nominal", accum_dtype="float64")
        for part in parts:
            acc.backward(mean_loss(fused, x[part], y[part]))
        make().step(fused, acc)
        grads = mean_loss(by_hand, x[parts[0]], y[parts[0]]).backward()
        second = mean_loss(by_hand, x[parts[1]], y[parts[1]]).backward()
        for p in by_hand.parameters():
            grads.set(p, (np.asarray(grads[p]) + np.asarray(second[p])) / 3)
        make().step(by_hand, grads)
        for a, b in zip(fused.parameters(), by_hand.parameters(), strict=True):
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=0, atol=1e-14)


def test_the_reduction_rules_name_their_micro_batch_loss_and_check_nominal() -> None:
    assert [micro_batch_loss_reduction(r) for r in ("mean", "mean_nominal", "items", "sum")] == \
        ["mean", "mean", "sum", "sum"]
    with pytest.raises(ValueError, match=r"mean_nominal.*needs nominal="):
        window_scale("mean_nominal", 2, 10)
    with pytest.raises(ValueError, match="reduction must be one of mean, sum, items, mean_nominal, got 'nominal'"):
        micro_batch_loss_reduction("nominal")


def test_the_learner_trains_with_mean_nominal_and_logs_the_per_item_loss(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    dataset = ArrayDataset(rng.normal(size=(22, 5)), rng.integers(0, 3, 22))
    mta.manual_seed(0)
    model = nn.Sequential(nn.Linear(5, 3, dtype="float64"))
    learner = (LearnerBuilder(tmp_path).grads_accumulation(4).reduction("mean_nominal").accum_dtype("float64")
               .progress("none").build(model, optim.SGD(0.5)))
    before = model.to_record()
    _, history = learner.fit(DataLoader(dataset, 5, shuffle=False))
    # 22 items in micro-batches of 5: one window of 4 and a partial window of 1 (2 items)
    assert [r["micro_batches"] for r in history.steps] == [4, 1]
    reference = nn.Sequential(nn.Linear(5, 3, dtype="float64"))
    reference.load_record(before)
    x, y = dataset.arrays
    windows = ([slice(0, 5), slice(5, 10), slice(10, 15), slice(15, 20)], [slice(20, 22)])
    for record, window in zip(history.steps, windows, strict=True):
        items = sum(len(y[p]) for p in window)
        summed = sum(float(mean_loss(reference, x[p], y[p]).item()) * len(y[p]) for p in window)
        assert record["items"] == items and record["loss"] == pytest.approx(summed / items, rel=1e-12)
        optim.SGD(0.5).step(reference, _container(reference, lightning_gradient(reference, x, y, window, 4)))
    for a, b in zip(model.parameters(), reference.parameters(), strict=True):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=0, atol=1e-13)


def _container(model: nn.Module, by_name: dict) -> object:
    from minitorch_accum.autodiff import Gradients

    grads = Gradients()
    for name, p in model.named_parameters():
        grads.set(p, by_name[name])
    return grads


def test_data_parallel_mean_nominal_divides_by_k_times_the_ranks() -> None:
    """Lightning under DDP: each rank divides by accumulate_grad_batches, DDP averages the ranks."""
    from minitorch_accum.distributed import DataParallel
    from minitorch_accum.testing import run_ranks

    x, y = data(15)
    parts = split(15, (4, 5, 6))  # ranks of k=2: rank 0 holds two micro-batches, rank 1 one
    models = [mlp("float64"), mlp("float64")]

    def rank(comm: object) -> tuple[float, dict]:
        model = models[comm.rank]
        acc = Accumulator(model, steps=2, reduction="mean_nominal", accum_dtype="float64",
                          reducer=DataParallel(comm))
        for part in parts[2 * comm.rank:2 * comm.rank + 2]:
            acc.backward(mean_loss(model, x[part], y[part]))
        return acc.window_scale(), window_grads(acc, model)

    (scale, grads), (other_scale, _) = run_ranks(2, rank)
    assert scale == other_scale == 0.25
    assert max_difference(grads, lightning_gradient(mlp("float64"), x, y, parts, 4)) <= 1e-13
