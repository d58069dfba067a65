"""LambdaLR, OneCycleLR and SequentialLR: their formulas, their state, and their refusals (their values
against PyTorch's step by step are in tests/equivalence/test_oracle_habits.py)."""

from __future__ import annotations

import itertools
import math

import pytest

from minitorch_accum import optim
from minitorch_accum.optim.lr_scheduler import LambdaLR, OneCycleLR, SequentialLR, StepLR


def rates(scheduler, n: int) -> list[float]:
    return [scheduler.step() for _ in range(n)]


def test_lambda_lr_scales_the_base_rate_by_the_function_of_the_step() -> None:
    assert rates(LambdaLR(0.5, lambda step: 0.9**step), 3) == [0.5, 0.5 * 0.9, 0.5 * 0.81]


def test_one_cycle_rises_to_max_lr_then_falls_to_its_floor() -> None:
    cycle = OneCycleLR(1.0, total_steps=10, pct_start=0.3, div_factor=10.0, final_div_factor=100.0)
    values = rates(cycle, 10)
    assert values[0] == pytest.approx(0.1)  # max_lr / div_factor
    assert values[2] == pytest.approx(1.0) and max(values) == values[2]  # the peak at pct_start * 10 - 1
    assert values[-1] == pytest.approx(0.1 / 100)  # initial / final_div_factor at the last step
    assert all(a < b for a, b in itertools.pairwise(values[:3]))
    assert all(a > b for a, b in itertools.pairwise(values[2:]))
    linear = OneCycleLR(1.0, total_steps=5, pct_start=0.4, anneal_strategy="linear", div_factor=4.0,
                        final_div_factor=1.0)
    assert rates(linear, 5) == pytest.approx([0.25, 1.0, 0.75, 0.5, 0.25])  # peak at 0.4 * 5 - 1
    assert OneCycleLR(1.0, epochs=2, steps_per_epoch=3).total_steps == 6


def test_one_cycle_refuses_a_step_past_its_total_as_pytorch_does() -> None:
    cycle = OneCycleLR(1.0, total_steps=3)
    rates(cycle, 4)  # steps 0..3: PyTorch computes the rate after the last step too
    with pytest.raises(ValueError, match="OneCycleLR: optimizer step 5 is past the cycle's total_steps=3"):
        cycle.step()


def test_sequential_restarts_each_scheduler_at_its_milestone() -> None:
    warm = LambdaLR(1.0, lambda step: (step + 1) / 3)
    decay = StepLR(1.0, step_size=2, gamma=0.5)
    chained = SequentialLR([warm, decay], milestones=[3])
    assert rates(chained, 7) == pytest.approx([1 / 3, 2 / 3, 1.0, 1.0, 1.0, 0.5, 0.5])
    three = SequentialLR([LambdaLR(1.0, lambda s: 0.1), LambdaLR(1.0, lambda s: 0.2), LambdaLR(1.0, lambda s: s)],
                         milestones=[1, 2])
    assert rates(three, 4) == pytest.approx([0.1, 0.2, 0.0, 1.0])


def test_a_scheduler_resumes_from_its_state_mid_schedule() -> None:
    def build() -> SequentialLR:
        return SequentialLR([LambdaLR(0.1, lambda s: s + 1.0), OneCycleLR(0.3, total_steps=8)], milestones=[2])

    straight = build()
    expected = rates(straight, 9)
    first = build()
    head = rates(first, 4)
    resumed = build()
    resumed.load_state_dict(first.state_dict())
    assert head + rates(resumed, 5) == expected  # bit for bit: a pure function of the step count


@pytest.mark.parametrize(("make", "message"), [
    (lambda: LambdaLR(optim.SGD(0.1), lambda s: 1.0), r"LambdaLR: takes the rate, not the optimizer.*lr=opt.lr"),
    (lambda: OneCycleLR(optim.AdamW(lr=0.1), 10), r"OneCycleLR: takes the rate, not the optimizer.*max_lr=opt.lr"),
    (lambda: SequentialLR(optim.SGD(0.1), [1]), r"SequentialLR: takes \(schedulers, milestones\), not the optimizer"),
    (lambda: LambdaLR(0.1, 2.0), "lr_lambda must be a function of the step, got float"),
    (lambda: LambdaLR(-1.0, abs), "LambdaLR: lr must be a positive number"),
    (lambda: OneCycleLR(0.1), "give total_steps, or epochs and steps_per_epoch"),
    (lambda: OneCycleLR(0.1, 0), "total_steps must be a positive int, got 0"),
    (lambda: OneCycleLR(0.1, 10, pct_start=1.5), r"pct_start must be a number in \[0, 1\], got 1.5"),
    (lambda: OneCycleLR(0.1, 10, anneal_strategy="exp"), "anneal_strategy must be 'cos' or 'linear'"),
    (lambda: OneCycleLR(0.1, 10, cycle_momentum=True), "cycle_momentum=True is not offered"),
    (lambda: SequentialLR([], []), "needs at least one scheduler"),
    (lambda: SequentialLR([StepLR(1.0, 1), StepLR(1.0, 1)], []), r"2 schedulers need 1 milestone\(s\), got 0"),
    (lambda: SequentialLR([StepLR(1.0, 1), StepLR(1.0, 1), StepLR(1.0, 1)], [3, 2]), "milestones must increase"),
    (lambda: SequentialLR([StepLR(1.0, 1), math.cos], [2]), "item 1 is a builtin_function_or_method"),
])
def test_refusals_name_the_fix(make, message: str) -> None:
    with pytest.raises((TypeError, ValueError), match=message):
        make()
