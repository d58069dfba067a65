"""The Learner: accumulation equals the big batch, per-step semantics, resume, bad input."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import minitorch_accum as mta
from minitorch_accum import nn, optim
from minitorch_accum.data import ArrayDataset, DataLoader
from minitorch_accum.optim.lr_scheduler import StepLR
from minitorch_accum.train import CheckpointError, LearnerBuilder, MemoryBudgetError
from tests.train.stopping_models import StopAt


def dataset(n: int = 100, seed: int = 0) -> ArrayDataset:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 6))
    y = (x[:, 0] + x[:, 1] > 0).astype(np.int64) + (x[:, 2] > 1).astype(np.int64)
    return ArrayDataset(x, y)


def model(dtype: str = "float64", seed: int = 0) -> nn.Module:
    mta.manual_seed(seed)
    return nn.Sequential(nn.Linear(6, 16, dtype=dtype), nn.Tanh(), nn.Linear(16, 3, dtype=dtype))


def train(tmp: Path, micro: int, k: int, epochs: int = 1, dtype: str = "float64", opt: optim.Optimizer | None = None,
          **builder_options) -> tuple[nn.Module, object]:
    net = model(dtype)
    builder = LearnerBuilder(tmp).num_epochs(epochs).grads_accumulation(k).progress("none")
    builder = builder.accum_dtype("float64" if dtype == "float64" else "float32")
    for name, value in builder_options.items():
        builder = getattr(builder, name)(*value) if isinstance(value, tuple) else getattr(builder, name)(value)
    learner = builder.build(net, opt or optim.AdamW(lr=0.01))
    return learner.fit(DataLoader(dataset(), micro, shuffle=True, seed=3))


@pytest.mark.parametrize("fusion", ["leaf", "gemm", "none"])
def test_k_micro_batches_equal_one_big_batch_after_an_epoch(tmp_path: Path, fusion: str) -> None:
    # 100 items: 8 x 4 gives 3 windows of 32 items and a partial window of 4
    accumulated, history = train(tmp_path / "acc", micro=4, k=8, fusion=fusion)
    big, big_history = train(tmp_path / "big", micro=32, k=1, fusion=fusion)
    assert [r["items"] for r in history.steps] == [32, 32, 32, 4] == [r["items"] for r in big_history.steps]
    for (name, a), (_, b) in zip(accumulated.named_parameters(), big.named_parameters(), strict=True):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=0, atol=1e-10, err_msg=name)


def test_partial_window_can_be_dropped(tmp_path: Path) -> None:
    _, history = train(tmp_path, micro=4, k=8, drop_last_window=True)
    assert [r["items"] for r in history.steps] == [32, 32, 32]


def test_scheduler_advances_once_per_optimizer_step(tmp_path: Path) -> None:
    scheduler = StepLR(0.1, step_size=2, gamma=0.5)
    _, history = train(tmp_path, micro=4, k=5, epochs=2, lr_scheduler=scheduler)
    steps = history.steps
    assert len(steps) == 2 * 5 == scheduler.steps_taken  # 25 micro-batches per epoch, 5 per window
    assert [r["lr"] for r in steps[:5]] == [0.1, 0.1, 0.05, 0.05, 0.025]
    lines = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    train_lines = [r for r in lines if r["kind"] == "train"]
    assert [r["step"] for r in train_lines] == list(range(1, 11))
    assert all(r["micro_batches"] == 5 for r in train_lines)
    for key in ("epoch", "items", "loss", "lr", "grad_norm", "peak_activation_bytes", "accumulation_seconds",
                "step_seconds"):
        assert key in train_lines[0]


def test_effective_batch_and_schedule_choose_k(tmp_path: Path) -> None:
    _, history = train(tmp_path / "eff", micro=10, k=1, effective_batch=50)
    assert [r["micro_batches"] for r in history.steps] == [5, 5]
    _, history = train(tmp_path / "sched", micro=10, k=1, epochs=2, accumulation_schedule={0: 5, 1: 2})
    assert [r["micro_batches"] for r in history.steps] == [5, 5, 2, 2, 2, 2, 2]


def _interrupted_and_resumed(tmp_path: Path, builder: Callable[[Path], LearnerBuilder],
                             loader: Callable[[], DataLoader], lr: float,
                             at: int) -> tuple[nn.Module, nn.Module, object, str]:
    """(uninterrupted run, the run interrupted at micro-batch ``at`` then resumed, its history,
    the checkpoint it resumed from)."""
    reference, _ = builder(tmp_path / "ref").build(model("float32"), optim.AdamW(lr=lr)).fit(loader())
    killed = builder(tmp_path / "run").build(StopAt(model("float32"), at=at), optim.AdamW(lr=lr))
    with pytest.raises(KeyboardInterrupt):
        killed.fit(loader())
    saved = (tmp_path / "run" / "checkpoints" / "latest").read_text().strip()
    resumed = builder(tmp_path / "run").build(model("float32", seed=99), optim.AdamW(lr=lr))
    final, history = resumed.fit(loader(), resume=True)
    return reference, final, history, saved


@pytest.mark.parametrize("fusion", ["leaf", "gemm", "none"])
def test_resume_mid_window_is_bit_identical(tmp_path: Path, fusion: str) -> None:
    def builder(directory: Path) -> LearnerBuilder:
        return (LearnerBuilder(directory).num_epochs(2).grads_accumulation(4).fusion(fusion).seed(5)
                .progress("none").lr_scheduler(StepLR(0.05, 3, 0.5)).with_file_checkpointer(every_steps=2))

    reference, final, history, saved = _interrupted_and_resumed(
        tmp_path, builder, lambda: DataLoader(dataset(), 8, seed=1), lr=0.05, at=18)
    assert saved.endswith("batch000005")  # epoch 1, after 5 of its 13 micro-batches: mid-window
    for (name, a), (_, b) in zip(reference.named_parameters(), final.named_parameters(), strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=name)
    assert [r["step"] for r in history.steps] == list(range(1, 9))


@pytest.mark.parametrize("mode", ["bf16", "fp16"])
def test_a_mixed_precision_run_resumes_bit_identically(tmp_path: Path, mode: str) -> None:
    # bfloat16 weights are written as safetensors' BF16, which its NumPy reader does not know
    def builder(directory: Path) -> LearnerBuilder:
        return (LearnerBuilder(directory).num_epochs(2).grads_accumulation(2).mixed_precision(mode).seed(5)
                .progress("none").with_file_checkpointer(every_steps=2))

    reference, final, history, saved = _interrupted_and_resumed(
        tmp_path, builder, lambda: DataLoader(dataset(), 10, seed=1), lr=0.02, at=13)
    assert saved  # something to resume from
    assert [r["step"] for r in history.steps] == list(range(1, 11))
    for (name, a), (_, b) in zip(reference.named_parameters(), final.named_parameters(), strict=True):
        assert b.dtype == a.dtype and a.dtype.name == {"bf16": "bfloat16", "fp16": "float16"}[mode]
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=name)


def test_bad_input_gets_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"grads_accumulation \(k\) must be a positive int, got 0"):
        LearnerBuilder(tmp_path).grads_accumulation(0)
    with pytest.raises(ValueError, match="must be a positive int, got -3"):
        LearnerBuilder(tmp_path).grads_accumulation(-3)
    with pytest.raises(ValueError, match="needs an entry for epoch 0"):
        LearnerBuilder(tmp_path).accumulation_schedule({2: 4})
    learner = LearnerBuilder(tmp_path).effective_batch(16).progress("none").build(model(), optim.SGD(0.1))
    with pytest.raises(ValueError, match=r"micro-batch of 32 items is larger than the effective batch of 16"):
        learner.fit(DataLoader(dataset(), 32))
    learner = LearnerBuilder(tmp_path).effective_batch(50).progress("none").build(model(), optim.SGD(0.1))
    with pytest.raises(ValueError, match=r"effective batch 50 is not a multiple of the micro-batch 8"):
        learner.fit(DataLoader(dataset(), 8))
    learner = LearnerBuilder(tmp_path).memory_budget(1000).progress("none").build(model(), optim.SGD(0.1))
    with pytest.raises(MemoryBudgetError, match="too small for one item"):
        learner.fit(DataLoader(dataset(), 8))
    with pytest.raises(ValueError, match="unknown metric 'speed'"):
        LearnerBuilder(tmp_path).metric("speed")


def test_memory_budget_picks_a_micro_batch_that_fits(tmp_path: Path) -> None:
    net = model("float32")
    learner = (LearnerBuilder(tmp_path).effective_batch(40).memory_budget(10**9).progress("none")
               .build(net, optim.SGD(0.1)))
    _, history = learner.fit(DataLoader(dataset(), 4))
    plan = history.memory_plan
    assert plan is not None and plan.micro_batch * plan.steps == 40 and plan.micro_batch == 40
    tight = plan.persistent_bytes + plan.fixed_activation_bytes + plan.per_item_bytes * 12
    learner = (LearnerBuilder(tmp_path / "tight").effective_batch(40).memory_budget(int(tight)).progress("none")
               .build(model("float32"), optim.SGD(0.1)))
    _, history = learner.fit(DataLoader(dataset(), 4))
    assert history.memory_plan.micro_batch <= 12 and 40 % history.memory_plan.micro_batch == 0
    assert all(r["items"] == 40 for r in history.steps[:2])


def test_corrupt_latest_checkpoint_falls_back_to_an_intact_one_and_says_so(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    builder = (LearnerBuilder(tmp_path).num_epochs(1).grads_accumulation(2).progress("plain")
               .with_file_checkpointer(every_steps=1, keep=3))
    with pytest.raises(CheckpointError, match="no checkpoint found"):
        builder.build(model(), optim.SGD(0.1)).fit(DataLoader(dataset(), 10), resume=True)
    builder.build(model(), optim.SGD(0.1)).fit(DataLoader(dataset(), 10))
    (tmp_path / "final.safetensors").unlink()  # as if stopped before its end (a complete run has nothing to resume)
    checkpoints = tmp_path / "checkpoints"
    latest = checkpoints / (checkpoints / "latest").read_text().strip()
    weights = latest / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-5] ^= 0xFF
    weights.write_bytes(bytes(data))
    capsys.readouterr()
    _, history = builder.build(model(), optim.SGD(0.1)).fit(DataLoader(dataset(), 10), resume=True)
    captured = capsys.readouterr()
    err, out = captured.err, captured.out  # the fallback is a warning, on stderr whatever the progress
    assert "model.safetensors does not match its checksum" in err and "newest intact checkpoint" in err
    assert f"kept as {latest.name}.damaged-1" in err
    assert "resumed from step 4" in out  # the step before the damaged one, then step 5 again
    assert [r["step"] for r in history.steps] == [1, 2, 3, 4, 5]
    (tmp_path / "final.safetensors").unlink()
    for directory in checkpoints.iterdir():
        if directory.is_dir():
            (directory / "state.json").unlink()
    with pytest.raises(CheckpointError, match="no intact checkpoint"):
        builder.build(model(), optim.SGD(0.1)).fit(DataLoader(dataset(), 10), resume=True)


@pytest.mark.parametrize("mode, dtype", [("bf16", mta.bfloat16), ("fp16", mta.float16)])
def test_mixed_precision_trains_16_bit_parameters_with_float32_gradients(tmp_path: Path, mode: str,
                                                                         dtype: np.dtype) -> None:
    net = model("float32")
    learner = (LearnerBuilder(tmp_path).num_epochs(3).grads_accumulation(2).mixed_precision(mode).progress("none")
               .build(net, optim.AdamW(lr=0.02)))
    trained, history = learner.fit(DataLoader(dataset(), 10, seed=2))
    assert all(p.dtype == dtype for p in trained.parameters())
    assert learner.accumulator.arena.buffer.dtype == np.float32
    first = next(name for name, _ in learner.step_model.named_parameters())  # "module.0.weight"
    assert learner.optimizer.state[first]["master"].dtype == np.float32
    assert (learner.accumulator.loss_scaler is not None) == (mode == "fp16")
    losses = [r["loss"] for r in history.steps]
    assert np.mean(losses[-3:]) < np.mean(losses[:3])
