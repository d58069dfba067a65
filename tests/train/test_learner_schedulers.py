"""PyTorch's LambdaLR, OneCycleLR and SequentialLR in the Learner: one rate per optimizer step (never per
micro-batch), and a run interrupted mid-schedule (and mid-window) resumes bit for bit."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from minitorch_accum import optim
from minitorch_accum.data import DataLoader
from minitorch_accum.optim.lr_scheduler import LambdaLR, LRScheduler, OneCycleLR, SequentialLR
from minitorch_accum.train import LearnerBuilder
from tests.train.stopping_models import StopAt
from tests.train.test_learner import dataset, model

# 100 items in micro-batches of 8: 13 per epoch, k = 4 gives 4 windows (the last partial), 8 in two epochs
STEPS = 8


def warmup_then_cycle() -> SequentialLR:
    return SequentialLR([LambdaLR(0.05, lambda step: (step + 1) / 3), OneCycleLR(0.05, total_steps=STEPS - 3)],
                        milestones=[3])


SCHEDULERS = {
    "lambda": lambda: LambdaLR(0.05, lambda step: 0.8**step),
    "one_cycle": lambda: OneCycleLR(0.05, total_steps=STEPS, pct_start=0.25),
    "sequential": warmup_then_cycle,
}


def builder(directory: Path, scheduler: LRScheduler) -> LearnerBuilder:
    return (LearnerBuilder(directory).num_epochs(2).grads_accumulation(4).seed(5).progress("none")
            .lr_scheduler(scheduler).with_file_checkpointer(every_steps=2))


def loader() -> DataLoader:
    return DataLoader(dataset(), 8, seed=1)


@pytest.mark.parametrize("name", sorted(SCHEDULERS))
def test_the_learner_takes_one_rate_per_optimizer_step(tmp_path: Path, name: str) -> None:
    _, history = builder(tmp_path, SCHEDULERS[name]()).build(model("float32"), optim.AdamW(lr=0.05)).fit(loader())
    expected = SCHEDULERS[name]()
    assert [r["lr"] for r in history.steps] == [expected.lr_at(step) for step in range(STEPS)]
    assert len(history.steps) == STEPS


@pytest.mark.parametrize("name", sorted(SCHEDULERS))
def test_a_resume_mid_schedule_is_bit_identical(tmp_path: Path, name: str) -> None:
    reference, straight = builder(tmp_path / "ref", SCHEDULERS[name]()).build(
        model("float32"), optim.AdamW(lr=0.05)).fit(loader())

    killed = builder(tmp_path / "run", SCHEDULERS[name]()).build(StopAt(model("float32"), at=18),
                                                                 optim.AdamW(lr=0.05))
    with pytest.raises(KeyboardInterrupt):
        killed.fit(loader())
    saved = (tmp_path / "run" / "checkpoints" / "latest").read_text().strip()
    assert saved.startswith("step0000005") and saved.endswith("batch000005")  # mid-schedule and mid-window
    # a fresh scheduler object, as a resumed process builds it: its position comes from the checkpoint
    resumed = builder(tmp_path / "run", SCHEDULERS[name]()).build(model("float32", seed=99), optim.AdamW(lr=0.05))
    final, history = resumed.fit(loader(), resume=True)
    for (param, a), (_, b) in zip(reference.named_parameters(), final.named_parameters(), strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=param)
    assert [r["lr"] for r in history.steps] == [r["lr"] for r in straight.steps]
