"""Resuming mid-window a model with Dropout: bit-identical to the uninterrupted run.

Dropout draws its masks from the global generator, so a resumed run only redraws the
same masks if the checkpoint restored the generator's state; without it every later
mask differs and so do the parameters and the losses. The run checkpoints after every
micro-batch (``with_file_checkpointer(every_micro_batches=1)``) and is interrupted
through the public ways a run stops: an exception out of ``train_step`` (a crash; the
run resumes from the last micro-batch checkpoint) or a Ctrl-C (the stop request: the
Learner finishes the micro-batch, checkpoints and raises KeyboardInterrupt).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import minitorch_accum as mta
from minitorch_accum import nn, optim
from minitorch_accum.data import ArrayDataset, DataLoader
from minitorch_accum.train import LearnerBuilder
from tests.train.stopping_models import StopAt, crash, send

K = 4
MICRO = 8
ITEMS = 100  # 13 micro-batches per epoch: windows of 4, 4, 4 and a partial 1
# what differs between two identical runs: wall-clock times and the memory probe
UNREPRODUCIBLE = {"accumulation_seconds", "step_seconds", "items_per_second", "peak_activation_bytes"}


def dataset(n: int, seed: int) -> ArrayDataset:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 6))
    y = (x[:, 0] + x[:, 1] > 0).astype(np.int64) + (x[:, 2] > 1).astype(np.int64)
    return ArrayDataset(x, y)


def model(seed: int = 0) -> nn.Module:
    mta.manual_seed(seed)
    return nn.Sequential(nn.Linear(6, 16, dtype="float64"), nn.Tanh(), nn.Dropout(0.3),
                         nn.Linear(16, 3, dtype="float64"))


def builder(directory: Path) -> LearnerBuilder:
    return (LearnerBuilder(directory).num_epochs(2).grads_accumulation(K).accum_dtype("float64").seed(5)
            .progress("none").with_file_checkpointer(every_micro_batches=1))


def fit(learner, resume: bool = False):
    return learner.fit(DataLoader(dataset(ITEMS, 0), MICRO, seed=1),
                       DataLoader(dataset(40, 7), 20, shuffle=False), resume=resume)


def metrics_lines(directory: Path) -> list[dict]:
    lines = [json.loads(line) for line in (directory / "metrics.jsonl").read_text().splitlines()]
    return [{key: value for key, value in line.items() if key not in UNREPRODUCIBLE} for line in lines]


# (how, at, the checkpoint it resumes from): micro-batch `at` counts from 1 over both epochs
STOPS = [
    ("crash", 19, "step0000005-epoch0001-batch000005"),   # epoch 1, 1 micro-batch into its 2nd window
    ("crash", 5, "step0000000-epoch0000-batch000003"),    # right after a step: its boundary had no checkpoint
    ("ctrl-c", 7, "step0000001-epoch0000-batch000007"),   # epoch 0, 3 into its 2nd window; resumes across epochs
]


@pytest.mark.parametrize("how, at, checkpoint", STOPS, ids=[f"{how}-at-{at}" for how, at, _ in STOPS])
def test_resume_mid_window_with_dropout_is_bit_identical(tmp_path: Path, how: str, at: int, checkpoint: str) -> None:
    reference, _ = fit(builder(tmp_path / "ref").build(model(), optim.SGD(0.1, momentum=0.9)))

    stopped = builder(tmp_path / "run").build(StopAt(model(), at, crash if how == "crash" else send()),
                                              optim.SGD(0.1, momentum=0.9))
    with pytest.raises(KeyboardInterrupt):
        fit(stopped)
    assert (tmp_path / "run" / "checkpoints" / "latest").read_text().strip() == checkpoint
    # a fresh process would start from other weights and another generator state
    resumed = builder(tmp_path / "run").build(model(seed=99), optim.SGD(0.1, momentum=0.9))
    final, history = fit(resumed, resume=True)

    expected = metrics_lines(tmp_path / "ref")
    assert [r["step"] for r in expected if r["kind"] == "train"] == list(range(1, 9))
    assert metrics_lines(tmp_path / "run") == expected  # loss, accuracy, grad_norm, lr, valid loss: equal
    assert [r["loss"] for r in history.steps] == [r["loss"] for r in expected if r["kind"] == "train"]
    for (name, a), (_, b) in zip(reference.named_parameters(), final.named_parameters(), strict=True):
        assert np.array_equal(a.numpy(), b.numpy()), name
