"""The warmup conventions by name (``optim/lr_scheduler.py``'s ``WARMUPS``), each against its peer's own
formula: this library's (step + 1) / W, nanoGPT's ``get_lr`` written out, and transformers' schedules
themselves; and a rate of 0 (Hugging Face's first warmup step) taken by the optimizers, as PyTorch's."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

import minitorch_accum as mta
from minitorch_accum import nn, optim
from minitorch_accum.autodiff import Gradients
from minitorch_accum.data import DataLoader
from minitorch_accum.nn import functional as F
from minitorch_accum.optim.lr_scheduler import CosineAnnealingLR, LinearWarmupLR
from minitorch_accum.train import LearnerBuilder
from tests.optim.schedule_rates import rates, torch_rates
from tests.train.test_learner import dataset, model

LR, MIN_LR, WARMUP, TOTAL = 6e-4, 6e-5, 4, 12


def nanogpt_get_lr(it: int, learning_rate: float = LR, min_lr: float = MIN_LR, warmup_iters: int = WARMUP,
                   lr_decay_iters: int = TOTAL) -> float:
    """nanoGPT's train.py ``get_lr``, as written there."""
    if it < warmup_iters:
        return learning_rate * (it + 1) / (warmup_iters + 1)
    if it > lr_decay_iters:
        return min_lr
    decay_ratio = (it - warmup_iters) / (lr_decay_iters - warmup_iters)
    assert 0 <= decay_ratio <= 1
    coeff = 0.5 * (1.0 + math.cos(math.pi * decay_ratio))
    return min_lr + coeff * (learning_rate - min_lr)


def test_the_nanogpt_warmup_is_nanogpts_get_lr() -> None:
    ours = rates(CosineAnnealingLR(LR, total_steps=TOTAL, min_lr=MIN_LR, warmup_steps=WARMUP, warmup="nanogpt"),
                 TOTAL + 3)
    assert ours == pytest.approx([nanogpt_get_lr(it) for it in range(TOTAL + 3)], rel=1e-15)
    assert ours[0] == LR / (WARMUP + 1) and max(ours[:WARMUP]) < LR  # never the full rate inside the warmup


def test_the_default_warmup_starts_at_one_step_of_w_and_reaches_the_rate_at_step_w_minus_1() -> None:
    ours = rates(CosineAnnealingLR(LR, total_steps=TOTAL, warmup_steps=WARMUP), WARMUP)
    assert ours == [LR * (s + 1) / WARMUP for s in range(WARMUP)] and ours[-1] == LR
    assert rates(LinearWarmupLR(LR, WARMUP, warmup="linear"), WARMUP + 1) == [*ours, LR]


def _huggingface(make_schedule, steps: int, **arguments) -> list[float]:
    """The rates a transformers schedule gives a torch optimizer, one per optimizer step."""
    return torch_rates(lambda optimizer: make_schedule(optimizer, **arguments), LR, steps)


def test_the_huggingface_warmup_is_transformers_schedules() -> None:
    transformers = pytest.importorskip("transformers")
    cosine = _huggingface(transformers.get_cosine_schedule_with_warmup, TOTAL + 1, num_warmup_steps=WARMUP,
                          num_training_steps=TOTAL)
    ours = rates(CosineAnnealingLR(LR, total_steps=TOTAL, warmup_steps=WARMUP, warmup="huggingface"), TOTAL + 1)
    assert ours == pytest.approx(cosine, rel=1e-12, abs=1e-20)
    assert ours[0] == 0.0 == cosine[0]  # the first step's rate is 0
    constant = _huggingface(transformers.get_constant_schedule_with_warmup, WARMUP + 2, num_warmup_steps=WARMUP)
    assert rates(LinearWarmupLR(LR, WARMUP, warmup="huggingface"), WARMUP + 2) == pytest.approx(constant, rel=1e-12)


@pytest.mark.parametrize("make", [lambda w: LinearWarmupLR(1.0, 2, warmup=w),
                                  lambda w: CosineAnnealingLR(1.0, 4, warmup_steps=2, warmup=w)],
                         ids=["LinearWarmupLR", "CosineAnnealingLR"])
def test_an_unknown_warmup_names_the_conventions_and_their_formulas(make) -> None:
    with pytest.raises(ValueError, match=r": warmup must be one of 'linear' \(\(step \+ 1\) / W\), 'nanogpt' "
                                         r"\(\(step \+ 1\) / \(W \+ 1\)\), 'huggingface' \(step / W\), got 'hf'$"):
        make("hf")


@pytest.mark.parametrize("make", [lambda lr: optim.SGD(lr, momentum=0.9), lambda lr: optim.AdamW(lr=lr)],
                         ids=["sgd", "adamw"])
def test_a_rate_of_0_is_taken_and_leaves_the_parameters_a_negative_one_is_refused(make) -> None:
    assert make(0.0).lr == 0.0  # PyTorch's SGD and AdamW take lr=0 too
    with pytest.raises(ValueError, match=r"^lr must be a number >= 0, got -0\.1$"):
        make(-0.1)
    with pytest.raises(ValueError, match=r"^lr must be a number >= 0, got -1$"):
        net = model()
        make(0.1).step(net, _gradients(net), lr=-1)


def _gradients(net: nn.Module) -> Gradients:
    x, y = dataset(8).get_batch(np.arange(8))
    return F.cross_entropy(net(mta.tensor(x)), y).backward()


def test_a_group_rate_cannot_be_scaled_from_an_optimizer_rate_of_0() -> None:
    net = model()
    first, second = net.parameters()[:2], net.parameters()[2:]
    opt = optim.SGD([{"params": first}, {"params": second, "lr": 0.5}], lr=0.0)
    with pytest.raises(ValueError, match=r"^SGD\.step: lr=0\.1 cannot scale the parameter groups' own rates when "
                                         r"the optimizer's lr is 0"):
        opt.step(net, _gradients(net), lr=0.1)
    assert opt.step_count == 0


def test_the_learner_runs_the_huggingface_cosine_from_its_rate_of_0(tmp_path: Path) -> None:
    # 100 items in micro-batches of 10, k = 2: 5 optimizer steps; the first at rate 0 moves nothing
    schedule = CosineAnnealingLR(0.05, total_steps=5, warmup_steps=2, warmup="huggingface")
    net = model()
    before = [p.numpy().copy() for p in net.parameters()]
    steps_seen: list[list[np.ndarray]] = []

    class AfterEachStep:
        def on_step_end(self, learner, record) -> None:
            steps_seen.append([p.numpy().copy() for p in learner.model.parameters()])

    learner = (LearnerBuilder(tmp_path).grads_accumulation(2).progress("none").accum_dtype("float64")
               .lr_scheduler(schedule).callback(AfterEachStep()).build(net, optim.SGD(0.05)))
    _, history = learner.fit(DataLoader(dataset(), 10, seed=1))
    assert [r["lr"] for r in history.steps] == pytest.approx([0.0, 0.025, 0.05, 0.05 * 0.75, 0.05 * 0.25])
    assert all(np.array_equal(a, b) for a, b in zip(steps_seen[0], before, strict=True))  # rate 0: unchanged
    assert not np.array_equal(steps_seen[1][0], before[0])
