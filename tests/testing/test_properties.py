"""The properties a user's model gets for free: all hold on exact models, each fails when what it
guards breaks (a faulty recipe, or the library's own code broken for the test), and models that
cannot match the big batch are reported, not failed."""

from __future__ import annotations

import pytest

import minitorch_accum as mta
from minitorch_accum import nn
from minitorch_accum.accum import Accumulator
from minitorch_accum.distributed import DataParallel
from minitorch_accum.testing import PROPERTIES, AccumulationMismatch, Recipe, check_properties
from minitorch_accum.testing.bug_recipes import ClipsEachMicroBatch
from minitorch_accum.testing.property_results import FAILED, INEXACT, PASSED, SKIPPED
from tests.testing.models import Residual, batch, padded_loss, padded_tokens, summed_loss, token_model


def test_every_property_holds_on_a_residual_model_and_on_padded_sequences() -> None:
    for factory, loss, data in ((Residual, summed_loss, batch()), (token_model, padded_loss, padded_tokens())):
        report = check_properties(factory, loss, data, splits=[(3, 1, 4, 4)] if factory is Residual else [(1, 4, 3)])
        assert [r.name for r in report.results] == list(PROPERTIES)
        assert all(r.status == PASSED for r in report.results), str(report)
        assert report["loss_scaling_is_invisible"].max_gap == 0.0
        assert report["resume_mid_window_equals_uninterrupted"].max_gap == 0.0
        assert report["data_parallel_equals_one_rank"].worst  # every rank was compared


class ScalesTwice(Recipe):
    """A loss scale applied on top of the accumulator's own: the unscale no longer cancels it."""

    def backward(self, acc: Accumulator, loss: mta.Tensor, items: int) -> None:
        super().backward(acc, loss * 2.0 if acc.loss_scaler is not None else loss, items)


def test_loss_scaling_that_leaks_into_the_gradient_is_caught() -> None:
    report = check_properties(Residual, summed_loss, batch(), splits=[(5, 7)], recipe=ScalesTwice(),
                              properties=["loss_scaling_is_invisible"], raise_on_failure=False)
    assert report["loss_scaling_is_invisible"].status == FAILED


def test_a_resume_that_forgets_the_items_seen_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    load = Accumulator.load_state_dict

    def forgetful(self: Accumulator, state: dict) -> None:
        load(self, {**state, "meta": {**state["meta"], "items": 0}})

    monkeypatch.setattr(Accumulator, "load_state_dict", forgetful)
    report = check_properties(Residual, summed_loss, batch(), splits=[(3, 1, 4, 4)],
                              properties=["resume_mid_window_equals_uninterrupted"], raise_on_failure=False)
    assert report["resume_mid_window_equals_uninterrupted"].status == FAILED


def test_ranks_that_keep_their_own_item_counts_are_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    reduce = DataParallel.reduce

    def local_counts(self: DataParallel, store: object, micro_batches: int, items: int) -> tuple[int, int]:
        reduce(self, store, micro_batches, items)
        return micro_batches, items  # the sums are global, the counts this rank's

    monkeypatch.setattr(DataParallel, "reduce", local_counts)
    report = check_properties(token_model, padded_loss, padded_tokens(), splits=[(1, 4, 3)],
                              properties=["data_parallel_equals_one_rank"], raise_on_failure=False)
    result = report["data_parallel_equals_one_rank"]
    assert result.status == FAILED
    assert any(w.scenario == "rank 1 against rank 0" for w in result.worst.values())  # the ranks disagree too
    assert result.worst_parameter()[1].split == (1, 4, 3)


def test_batch_norm_is_inconclusive_per_property_and_a_recipe_without_an_arena_is_not_resumed() -> None:
    def with_batch_norm() -> nn.Module:
        return nn.Sequential(nn.Linear(5, 6), nn.BatchNorm1d(6), nn.Tanh(), nn.Linear(6, 3))

    report = check_properties(with_batch_norm, summed_loss, batch(), splits=[(3, 2, 3, 4)], raise_on_failure=False)
    assert not report.passed and {r.name for r in report.inexact} == {
        "window_equals_full_batch", "steps_equal_big_batch", "clipping_uses_the_window_norm",
        "data_parallel_equals_one_rank", "item_count_matches_the_loss"}  # the rows interact: no loss over items
    # BatchNorm is deterministic: a window still equals itself under a loss scale, and after a resume
    assert report["loss_scaling_is_invisible"].status == report["resume_mid_window_equals_uninterrupted"].status \
        == PASSED
    assert check_properties(with_batch_norm, summed_loss, batch(), splits=[(3, 2, 3, 4)],
                            allow_inconclusive=True).passed
    skipped = check_properties(Residual, summed_loss, batch(), splits=[(5, 7)], recipe=ClipsEachMicroBatch(),
                               properties=["resume_mid_window_equals_uninterrupted"], raise_on_failure=False)
    assert skipped["resume_mid_window_equals_uninterrupted"].status == SKIPPED and not skipped.passed
    assert INEXACT == "inconclusive"


def test_clipping_clips_to_half_the_smallest_micro_batch_share_and_resume_saves_halfway() -> None:
    import re

    import numpy as np

    from minitorch_accum.nn import functional as F

    x, y = batch()
    sizes = (3, 1, 4, 4)
    report = check_properties(Residual, summed_loss, (x, y), splits=[sizes], dtype="float64",
                              properties=["clipping_uses_the_window_norm", "resume_mid_window_equals_uninterrupted"])
    model = Residual().to(dtype="float64")
    shares, start = [], 0
    for n in sizes:
        grads = F.cross_entropy(model(mta.tensor(x[start:start + n], dtype="float64")), y[start:start + n],
                                reduction="sum").backward()
        shares.append(np.sqrt(sum(float(np.sum(np.asarray(g) ** 2)) for g in grads.values())) / len(y))
        start += n
    scenario = report["clipping_uses_the_window_norm"].worst_parameter()[1].scenario
    clipped = float(re.search(r"max_norm=([0-9.e-]+)", scenario).group(1))
    assert clipped == pytest.approx(0.5 * min(shares), rel=1e-2) and min(shares) < 1
    assert report["resume_mid_window_equals_uninterrupted"].worst_parameter()[1].scenario == \
        "split (3, 1, 4, 4) saved after 2 of 4 micro-batches"
    three = check_properties(Residual, summed_loss, (x, y), splits=[(5, 3, 4)],
                             properties=["resume_mid_window_equals_uninterrupted"])
    assert three.results[0].worst_parameter()[1].scenario == "split (5, 3, 4) saved after 1 of 3 micro-batches"


class ClipsEachMicroBatchAndTheWindow(ClipsEachMicroBatch):
    """Clips the running gradient after every micro-batch, then the window once more: the window's
    norm ends right, its direction does not."""

    def clip(self, source: object, max_norm: float) -> None:
        Recipe.clip(self, source, max_norm)


def test_clipping_micro_batch_by_micro_batch_is_caught_even_when_the_window_is_clipped_again() -> None:
    report = check_properties(Residual, summed_loss, batch(), splits=[(3, 1, 4, 4)], dtype="float64",
                              recipe=ClipsEachMicroBatchAndTheWindow(), properties=["clipping_uses_the_window_norm"],
                              raise_on_failure=False)
    assert report["clipping_uses_the_window_norm"].status == FAILED
    assert report["clipping_uses_the_window_norm"].worst_parameter()[1].ratio > 100


def test_the_clipping_tolerance_is_the_scaled_bound_plus_the_norms_own_error() -> None:
    import numpy as np

    from minitorch_accum.testing.check_context import CheckContext
    from minitorch_accum.testing.subject import Subject
    from minitorch_accum.testing.window_properties import clipping_uses_the_window_norm

    for reduction in ("items", "sum"):
        ctx = CheckContext(Subject(Residual, summed_loss, batch(), "float64"), ((3, 1, 4, 4),),
                           Recipe(reduction=reduction))
        result = clipping_uses_the_window_norm(ctx)
        full = ctx.reference()
        norm = np.sqrt(sum(float(np.sum(g * g)) for g in full.values()))
        base = ctx.tolerance(4).bounds
        relative = np.sqrt(sum(float(np.sum(np.broadcast_to(b, full[n].shape) ** 2)) for n, b in base.items())) / norm
        clipped = float(result.worst_parameter()[1].scenario.split("max_norm=")[1].split(" ")[0])
        model = Residual().to(dtype="float64")
        shares = []
        for rows in (slice(0, 3), slice(3, 4), slice(4, 8), slice(8, 12)):
            grads = ctx.subject.reference_gradient(model, rows=rows, reduction="sum")
            shares.append(np.sqrt(sum(float(np.sum(g * g)) for g in grads.values())))
        scale = 1.0 if reduction == "sum" else 1.0 / 12
        assert clipped == pytest.approx(0.5 * min(shares) * scale, rel=1e-2)
        coef = min(1.0, 0.5 * min(shares) * scale / (norm + 1e-6))  # clip_grad_norm's rule
        for name, worst in result.worst.items():
            expected = coef * np.broadcast_to(base[name], full[name].shape) + 2.0 * relative * np.abs(coef * full[name])
            assert np.isclose(expected, worst.tolerance, rtol=1e-9, atol=0).any(), name


def test_two_ranks_each_hold_one_micro_batch_of_a_two_part_split_and_a_resume_failure_replays_its_split(
        monkeypatch: pytest.MonkeyPatch) -> None:
    report = check_properties(Residual, summed_loss, batch(), splits=[(5, 7)],
                              properties=["data_parallel_equals_one_rank"])
    scenarios = {w.scenario for w in report.results[0].worst.values()}
    assert scenarios <= {f"split (5, 7) over 2 ranks, k=1 (rank 0: 1, rank 1: 1 micro-batches), rank {r}'s gradient"
                         for r in (0, 1)} | {"rank 1 against rank 0"}
    load = Accumulator.load_state_dict
    monkeypatch.setattr(Accumulator, "load_state_dict",
                        lambda self, state: load(self, {**state, "meta": {**state["meta"], "items": 0}}))
    with pytest.raises(AccumulationMismatch) as caught:
        check_properties(Residual, summed_loss, batch(), splits=[(12,), (3, 1, 4, 4)],
                         properties=["resume_mid_window_equals_uninterrupted"])
    assert "splits=[(3, 1, 4, 4)]" in caught.value.replay


def _scenarios(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every scenario a property compares, in order (the report keeps only the worst per parameter)."""
    from minitorch_accum.testing.property_results import PropertyResult

    seen: list[str] = []
    compare = PropertyResult.compare

    def recording(self: PropertyResult, got: object, expected: object, tolerance: object, scenario: str,
                  split: object = None) -> None:
        seen.append(scenario)
        compare(self, got, expected, tolerance, scenario, split)

    monkeypatch.setattr(PropertyResult, "compare", recording)
    return seen


class RecordsK(Recipe):
    """The library's recipe, noting the k of each training run."""

    def __init__(self) -> None:
        super().__init__()
        self.ks: list[int] = []

    def train(self, subject: object, model: object, optimizer: object, scheduler: object, epoch: object, k: int,
              epochs: int, max_norm: float | None = None) -> None:
        self.ks.append(k)
        super().train(subject, model, optimizer, scheduler, epoch, k, epochs, max_norm)


def test_each_split_is_compared_as_a_full_window_and_a_window_one_short(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _scenarios(monkeypatch)
    check_properties(Residual, summed_loss, batch(4), splits=[(1, 3), (4,)], properties=["window_equals_full_batch"])
    assert seen == ["split (1, 3) in a full window (k=2)", "split (1, 3) in a partial window (k=3)",
                    "split (4,) in a full window (k=1)", "split (4,) in a partial window (k=2)"]


def test_the_steps_are_taken_with_k_2_and_with_k_one_past_the_epoch(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _scenarios(monkeypatch)
    recipe = RecordsK()
    check_properties(Residual, summed_loss, batch(4), splits=[(1, 1, 2)], properties=["steps_equal_big_batch"],
                     recipe=recipe, dtype="float64")
    assert recipe.ks == [2, 4, 2, 4]  # SGD then AdamW; an epoch of 3 micro-batches, k = 4 never fills
    sgd, adamw = "SGD(momentum=0.9, nesterov, weight_decay=0.01)", "AdamW(lr=0.01, weight_decay=0.1)"
    tail = "2 epochs, lr halving every step"
    assert seen == [f"{sgd}, split (1, 1, 2), k=2, {tail}",
                    f"{sgd}, split (1, 1, 2), an epoch of 3 micro-batches shorter than k, {tail}",
                    f"{adamw}, split (1, 1, 2), k=2, {tail}",
                    f"{adamw}, split (1, 1, 2), an epoch of 3 micro-batches shorter than k, {tail}"]


class RanksOneUlpApart(Recipe):
    """Rank 1's gradient one unit in the last place above rank 0's: within any rounding bound of the big
    batch, but the ranks no longer agree."""

    def rank_gradients(self, subject: object, models: object, shares: object, k: int) -> list:
        import numpy as np

        per_rank = super().rank_gradients(subject, models, shares, k)
        per_rank[1] = {name: np.nextafter(g, np.inf) for name, g in per_rank[1].items()}
        return per_rank


def test_ranks_one_ulp_apart_fail_and_say_the_ranks_must_agree_bit_for_bit() -> None:
    report = check_properties(Residual, summed_loss, batch(4), splits=[(1, 3)], dtype="float64",
                              properties=["data_parallel_equals_one_rank"], recipe=RanksOneUlpApart(),
                              raise_on_failure=False)
    result = report["data_parallel_equals_one_rank"]
    _, worst = result.worst_parameter()
    assert result.status == FAILED and worst.scenario == "rank 1 against rank 0"
    assert worst.why == "bit-identical across ranks: each adds the same sums in the same order"
    # the ranks' own comparison with the big batch uses the bound for the window's 2 micro-batches + 2 ranks
    assert "and k = 4:" in result.why


def _starts_at_zero() -> nn.Module:
    layer = nn.Linear(2, 1, bias=False)
    layer.weight.data[...] = 0.0
    return layer


def _squared(output: mta.Tensor, targets: object) -> tuple[mta.Tensor, int]:
    from minitorch_accum.nn import functional as F

    return F.mse_loss(output, mta.tensor(targets, dtype=output.dtype), reduction="sum"), len(targets)


def test_a_window_whose_norm_is_below_the_clip_is_left_as_it_is() -> None:
    import numpy as np

    # at w = 0 the rows' gradients are -2x and +1.8x: each micro-batch's share is far above the window's 0.2|x|,
    # so the threshold (half the smallest share) does not clip the window at all (clip_grad_norm's factor is 1)
    x, y = np.array([[1.0, 0.5], [-1.0, -0.5]]), np.array([[1.0], [0.9]])
    report = check_properties(_starts_at_zero, _squared, (x, y), splits=[(1, 1)], dtype="float64",
                              properties=["clipping_uses_the_window_norm"])
    assert report.results[0].status == PASSED and "clipping factor 1," in report.results[0].why


def test_the_steps_of_a_summed_reduction_are_compared_with_summed_big_batch_steps() -> None:
    report = check_properties(Residual, summed_loss, batch(4), splits=[(1, 3)], reduction="sum", dtype="float64",
                              properties=["steps_equal_big_batch"])
    assert report.results[0].status == PASSED


def test_a_gradient_that_is_zero_everywhere_has_nothing_to_clip() -> None:
    def no_gradient(output: mta.Tensor, targets: object) -> tuple[mta.Tensor, int]:
        return (output * 0.0).sum(), len(targets)

    report = check_properties(Residual, no_gradient, batch(4), splits=[(1, 3)], raise_on_failure=False,
                              properties=["clipping_uses_the_window_norm"])
    assert report.results[0].status == SKIPPED
    assert report.results[0].notes == ["the gradient is zero: there is nothing to clip"]
