"""The schedules of ``optim/lr_scheduler.py`` one by one: their defaults (PyTorch's), the edges of
what they accept, their rates where a warmup or a phase ends, and the messages of their refusals."""

from __future__ import annotations

import math

import pytest

from minitorch_accum import optim
from minitorch_accum.optim.lr_scheduler import (
    ConstantLR,
    CosineAnnealingLR,
    LambdaLR,
    LinearWarmupLR,
    OneCycleLR,
    SequentialLR,
    StepLR,
)


def rates(scheduler, n: int) -> list[float]:
    return [scheduler.step() for _ in range(n)]


def test_the_defaults_are_pytorchs() -> None:
    assert rates(StepLR(1.0, step_size=1), 3) == [1.0, 0.1, 0.1**2]  # gamma 0.1
    assert rates(CosineAnnealingLR(2.0, total_steps=2), 4)[2:] == [0.0, 0.0]  # down to min_lr 0
    cycle = OneCycleLR(1.0, total_steps=10)  # from max_lr / 25 down to that / 1e4
    assert [cycle.lr_at(0), cycle.lr_at(9)] == pytest.approx([1.0 / 25.0, 1.0 / 25.0 / 1e4], rel=1e-12)


def test_a_warmup_rises_from_its_start_factor_in_equal_steps() -> None:
    warm = LinearWarmupLR(2.0, warmup_steps=4, start_factor=0.5)
    assert rates(warm, 6) == [2.0 * (0.5 + 0.5 * (s + 1) / 4) for s in range(4)] + [2.0, 2.0]
    assert rates(LinearWarmupLR(2.0, warmup_steps=0), 2) == [2.0, 2.0]  # no warmup at all


def test_cosine_after_a_warmup_starts_at_the_rate_and_ends_at_min_lr() -> None:
    lr, low, warmup, total = 2.0, 0.5, 2, 6
    cosine = CosineAnnealingLR(lr, total_steps=total, min_lr=low, warmup_steps=warmup)
    want = [lr * (s + 1) / warmup for s in range(warmup)]
    want += [low + 0.5 * (lr - low) * (1 + math.cos(math.pi * s / (total - warmup))) for s in range(total - warmup)]
    assert rates(cosine, total + 2) == pytest.approx(want + [low, low], rel=1e-15)
    # a warmup as long as the schedule: the rate, then min_lr from the step after
    assert rates(CosineAnnealingLR(lr, total_steps=2, min_lr=low, warmup_steps=2), 4) == [1.0, 2.0, 2.0, 0.5]
    assert rates(CosineAnnealingLR(lr, total_steps=3, min_lr=low, warmup_steps=2), 4) == [1.0, 2.0, 2.0, 0.5]
    assert rates(CosineAnnealingLR(lr, total_steps=1, min_lr=low), 2) == [2.0, 0.5]


@pytest.mark.parametrize(("total", "warmup"), [(0, 0), (-1, 0), (5, -1), (5, 6), (5, 7)])
def test_cosine_refuses_a_warmup_outside_the_schedule(total: int, warmup: int) -> None:
    with pytest.raises(ValueError, match=rf"^need total_steps > 0 and 0 <= warmup_steps <= total_steps, got "
                                         rf"total_steps={total}, warmup_steps={warmup}$"):
        CosineAnnealingLR(1.0, total_steps=total, warmup_steps=warmup)
    assert CosineAnnealingLR(1.0, total_steps=5, warmup_steps=4).warmup_steps == 4


@pytest.mark.parametrize("make", [ConstantLR, lambda lr: LinearWarmupLR(lr, 2), lambda lr: CosineAnnealingLR(lr, 4),
                                  lambda lr: StepLR(lr, 2)], ids=["constant", "warmup", "cosine", "step"])
def test_a_rate_of_zero_is_refused_naming_lr(make) -> None:
    with pytest.raises(ValueError, match=r"^lr must be positive, got 0\.0$"):
        make(0.0)
    with pytest.raises(ValueError, match=r"^warmup_steps must be >= 0, got -1$"):
        LinearWarmupLR(1.0, warmup_steps=-1)


def test_one_cycle_accepts_the_ends_of_pct_start() -> None:
    rising = OneCycleLR(1.0, total_steps=4, pct_start=1.0)
    assert [rising.lr_at(0), rising.lr_at(3)] == pytest.approx([1.0 / 25.0, 1.0], rel=1e-12)  # all the way up
    falling = OneCycleLR(1.0, total_steps=4, pct_start=0.0)
    assert falling.lr_at(3) == pytest.approx(1.0 / 25.0 / 1e4, rel=1e-12)


def test_one_cycles_three_phases_go_up_back_and_down() -> None:
    cycle = OneCycleLR(1.0, total_steps=10, pct_start=0.3, anneal_strategy="linear", three_phase=True,
                       div_factor=4.0, final_div_factor=10.0)
    # up over steps 0..2, back to the initial rate over 2..4, down to initial / 10 over 4..9
    assert rates(cycle, 10) == pytest.approx([0.25, 0.625, 1.0, 0.625, 0.25, 0.205, 0.16, 0.115, 0.07, 0.025])


@pytest.mark.parametrize(("make", "message"), [
    (lambda: OneCycleLR(0.1, epochs=2), r"^OneCycleLR: give total_steps, or epochs and steps_per_epoch$"),
    (lambda: OneCycleLR(0.1, epochs=0, steps_per_epoch=3), r"^OneCycleLR: epochs must be a positive int, got 0$"),
    (lambda: OneCycleLR(0.1, epochs=2, steps_per_epoch=0),
     r"^OneCycleLR: steps_per_epoch must be a positive int, got 0$"),
    (lambda: OneCycleLR(0.1, 2.5), r"^OneCycleLR: total_steps must be a positive int, got 2\.5$"),
    (lambda: OneCycleLR(0.1, True), r"^OneCycleLR: total_steps must be a positive int, got True$"),
    (lambda: OneCycleLR(0.1, 10, pct_start="0.3"), r"^OneCycleLR: pct_start must be a number in \[0, 1\], "
                                                   r"got '0\.3'$"),
    (lambda: OneCycleLR(0.1, 10, pct_start=True), r"^OneCycleLR: pct_start must be a number in \[0, 1\], got True$"),
    (lambda: OneCycleLR(0.1, 10, cycle_momentum=True), r"^OneCycleLR: cycle_momentum=True is not offered: the "
                                                       r"scheduler gives the optimizer its rate only; the momentum "
                                                       r"\(or Adam's beta1\) stays as the optimizer was made$"),
    (lambda: OneCycleLR(0.1, 10, div_factor=0), r"^OneCycleLR: div_factor must be a positive number, got 0$"),
    (lambda: OneCycleLR(0.1, 10, final_div_factor=0),
     r"^OneCycleLR: final_div_factor must be a positive number, got 0$"),
    (lambda: SequentialLR(optim.SGD(0.1), [1]),
     r"^SequentialLR: takes \(schedulers, milestones\), not the optimizer: the schedulers carry their rates$"),
    (lambda: SequentialLR([], []), r"^SequentialLR: needs at least one scheduler$"),
    (lambda: SequentialLR([StepLR(1.0, 1), StepLR(1.0, 1)], [0]),
     r"^SequentialLR: milestone 0 must be a positive int, got 0$"),
    (lambda: SequentialLR([StepLR(1.0, 1), StepLR(1.0, 1), StepLR(1.0, 1)], [3, 3]),
     r"^SequentialLR: milestones must increase, got \[3, 3\]$"),
], ids=["epochs-alone", "epochs", "steps_per_epoch", "total-float", "total-bool", "pct-str", "pct-bool",
        "cycle_momentum", "div_factor", "final_div_factor", "sequential-optimizer", "sequential-empty",
        "milestone-zero", "milestones-equal"])
def test_refusals_are_worded_exactly(make, message: str) -> None:
    with pytest.raises((TypeError, ValueError), match=message):
        make()


def test_a_rate_at_a_phase_boundary_is_pytorchs_to_the_bit() -> None:
    torch = pytest.importorskip("torch")
    # phase ends on whole steps (pct_start * total_steps - 1 = 2 and 4): the step at an end belongs
    # to the phase that ends there, whose last rate rounds differently from the next one's first
    ours = OneCycleLR(0.3, 10, pct_start=0.3, anneal_strategy="linear", three_phase=True)
    optimizer = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.3)
    theirs = torch.optim.lr_scheduler.OneCycleLR(optimizer, 0.3, total_steps=10, pct_start=0.3,
                                                 anneal_strategy="linear", three_phase=True, cycle_momentum=False)
    expected = []
    for _ in range(10):
        expected.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        theirs.step()
    assert rates(ours, 10) == expected


def test_lambda_lr_is_unchanged_by_its_state_round_trip() -> None:
    scheduler = LambdaLR(0.5, lambda s: 1.0 / (s + 1))
    rates(scheduler, 3)
    resumed = LambdaLR(0.5, lambda s: 1.0 / (s + 1))
    resumed.load_state_dict(scheduler.state_dict())
    assert resumed.current() == scheduler.current() == 0.5 / 4
