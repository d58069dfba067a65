"""check_training_loop on loops written with this library: a right loop passes, each faulty loop
fails by name with what its first step measured, a resume that forgets the generator fails."""

from __future__ import annotations

import numpy as np
import pytest

import minitorch_accum as mta
from minitorch_accum import nn, optim
from minitorch_accum.accum import Accumulator
from minitorch_accum.nn import functional as F
from minitorch_accum.optim.lr_scheduler import StepLR
from minitorch_accum.testing import AccumulationMismatch
from minitorch_accum.testing.property_results import FAILED, INEXACT, PASSED
from minitorch_accum.testing.training_loop import Loop, batch_rows, check_training_loop, take_rows

ROWS = np.random.default_rng(0)
BATCH = (ROWS.normal(size=(12, 5)), ROWS.integers(0, 3, 12))


def loop_factory(reduction: str = "items", *, dropout: bool = False, keeps_generator: bool = True,
                 optimizer: str = "adamw", steps_when_full_only: bool = False, schedule_per_micro_batch: bool = False):
    """A loop over the library's Accumulator, the reduction and the faults chosen."""

    def make_loop(k: int) -> Loop:
        layers = [nn.Linear(5, 8), nn.Tanh(), *([nn.Dropout(0.3)] if dropout else []), nn.Linear(8, 3)]
        model = nn.Sequential(*layers).to(dtype="float64")
        opt = optim.SGD(0.1) if optimizer == "sgd" else optim.AdamW(lr=0.01, weight_decay=0.1)
        schedule = StepLR(opt.lr, 1, 0.5)
        acc = Accumulator(model, steps=k, reduction=reduction, accum_dtype="float64")

        def window(micro_batches: list) -> None:
            for x, y in micro_batches:
                loss = F.cross_entropy(model(mta.tensor(x, dtype="float64")), y, reduction="sum")
                if reduction != "items":
                    loss = loss * (1.0 / len(y))
                acc.backward(loss, num_items=len(y))
            if steps_when_full_only and len(micro_batches) < k:
                acc.zero()
                return
            opt.step(model, acc.grads(), lr=schedule.step())
            acc.zero()
            if schedule_per_micro_batch:  # the schedule advances once for every micro-batch after the first
                for _ in micro_batches[1:]:
                    schedule.step()

        def state() -> tuple:
            return (model.to_record(), opt.state_dict(), schedule.state_dict(),
                    mta.get_rng_state() if keeps_generator else None)

        def restore(saved: tuple) -> None:
            model.load_record(saved[0])
            opt.load_state_dict(saved[1], model)
            schedule.load_state_dict(saved[2])
            if saved[3] is not None:
                mta.set_rng_state(saved[3])

        return Loop(model, window, state=state, restore=restore)

    return make_loop


def test_a_loop_normalized_by_the_windows_items_passes_steps_and_resume() -> None:
    report = check_training_loop(loop_factory(), BATCH, splits=[(3, 1, 4, 4), (6, 6)])
    assert [(r.name, r.status) for r in report.results] == [("loop_steps_equal_big_batch", PASSED),
                                                            ("loop_resume_equals_uninterrupted", PASSED)]
    assert 0 < report.results[0].max_gap < 1e-12


def test_a_mean_of_micro_batch_means_fails_and_is_no_multiple_of_the_big_batch() -> None:
    with pytest.raises(AccumulationMismatch, match=r"loop_steps_equal_big_batch: .* split \(3, 1, 4, 4\)") as caught:
        check_training_loop(loop_factory("mean"), BATCH, splits=[(3, 1, 4, 4)])
    assert "no multiple of the big batch's" in "\n".join(caught.value.__notes__)


def test_the_nominal_k_rule_on_a_partial_window_is_named_with_its_fraction() -> None:
    report = check_training_loop(loop_factory("mean_nominal", optimizer="sgd"), BATCH, splits=[(3, 3, 3, 3)],
                                 raise_on_failure=False)
    steps = report["loop_steps_equal_big_batch"]
    assert steps.status == FAILED and "partial window (k=5)" in steps.worst_parameter()[1].scenario
    assert any("0.8 times the big batch's" in n and "the nominal-k rule" in n and "(4/5)" in n for n in steps.notes)


def test_a_dropped_partial_window_is_named() -> None:
    report = check_training_loop(loop_factory(steps_when_full_only=True), BATCH, splits=[(6, 6)],
                                 raise_on_failure=False)
    assert report["loop_steps_equal_big_batch"].status == FAILED
    assert any("moved no parameter" in n and "dropped" in n for n in report.notes)


def test_the_users_own_scheduler_is_under_test() -> None:
    report = check_training_loop(loop_factory(schedule_per_micro_batch=True, optimizer="sgd"), BATCH,
                                 splits=[(6, 6)], raise_on_failure=False)
    steps = report["loop_steps_equal_big_batch"]
    assert steps.status == FAILED
    assert any("the first step is right: the gap grows in later steps" in n for n in steps.notes)


def test_a_resume_that_leaves_the_generator_out_fails_and_asks_for_it() -> None:
    kept = check_training_loop(loop_factory(dropout=True), BATCH, splits=[(3, 1, 4, 4)])
    assert [r.status for r in kept.results] == [INEXACT, PASSED]
    forgot = check_training_loop(loop_factory(dropout=True, keeps_generator=False), BATCH, splits=[(3, 1, 4, 4)],
                                 raise_on_failure=False)
    resume = forgot["loop_resume_equals_uninterrupted"]
    assert resume.status == FAILED and "stopped after 1 of 3 steps" in resume.worst_parameter()[1].scenario
    assert any("does state() hold the generator's state" in n for n in resume.notes)


def test_a_loop_without_state_is_checked_without_resume_and_says_so() -> None:
    def make_loop(k: int) -> tuple:
        made = loop_factory()(k)
        return made.model, made.window

    report = check_training_loop(make_loop, BATCH, splits=[(6, 6)], windows=2)
    assert [r.name for r in report.results] == ["loop_steps_equal_big_batch"]
    assert "resume not checked: the loop gives no state()/restore()" in report.notes


def test_bad_loops_and_batches_are_refused_by_name() -> None:
    with pytest.raises(TypeError, match=r"make_loop\(k\) must return a Loop\(model, window\)"):
        check_training_loop(lambda k: 3, BATCH)
    with pytest.raises(TypeError, match=r"give window\(micro_batches\) .* or train\(windows\)"):
        Loop(object())
    with pytest.raises(TypeError, match=r"give state\(\) and restore\(state\) together"):
        Loop(object(), window=print, state=dict)
    unseeded = np.random.default_rng()

    def drifting(k: int) -> Loop:
        made = loop_factory()(k)
        made.model[0].weight.data[...] = unseeded.normal(size=(5, 8))
        return made

    with pytest.raises(ValueError, match=r"make_loop built two loops whose models differ \(0\.weight\)"):
        check_training_loop(drifting, BATCH, splits=[(6, 6)])
    with pytest.raises(ValueError, match=r"windows must be a positive int .*, got 0"):
        check_training_loop(loop_factory(), BATCH, windows=0)
    with pytest.raises(ValueError, match=r"batch: its arrays hold different numbers of rows \[11, 12\]"):
        check_training_loop(loop_factory(), (BATCH[0][:11], BATCH[1]))


def test_a_micro_batch_keeps_the_batchs_structure() -> None:
    batch = {"ids": np.arange(12).reshape(6, 2), "pair": (np.arange(6), [np.arange(6) * 2])}
    assert batch_rows(batch) == 6
    part = take_rows(batch, slice(2, 4))
    assert part["ids"].tolist() == [[4, 5], [6, 7]] and part["pair"][0].tolist() == [2, 3]
    assert part["pair"][1][0].tolist() == [4, 6] and isinstance(part["pair"], tuple)
