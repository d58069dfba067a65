"""The Learner over a TokenBudgetLoader: micro-batches of uneven rows and tokens, whose window equals one
batch of the same sequences only when it is normalized by its items (the tokens it holds); the run
records the budget it was cut by, a resume with another is refused, and the settings that count items
in micro-batches of a fixed size (effective_batch, memory_budget) say why they cannot apply."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import minitorch_accum as mta
from minitorch_accum import optim
from minitorch_accum.data import SequenceDataset, TokenBudgetLoader, load_sequences
from minitorch_accum.models import CharMLP
from minitorch_accum.nn import functional as F
from minitorch_accum.train import LearnerBuilder, MemoryBudgetError, SettingsMismatchError
from tests.train.test_checkpoint_contents import _latest, _resign

BUDGET = 160  # padded tokens: 24 sentences of 30 to 65 characters cut into 9 micro-batches of 2 to 4


def _data() -> SequenceDataset:
    every = load_sequences()
    return SequenceDataset(every.sequences[:24], every.vocab)


def _model() -> CharMLP:
    mta.manual_seed(0)
    return CharMLP(_data().vocab_size, dim=8, hidden=16, dtype="float64")


def _window_step(tmp_path: Path, reduction: str) -> tuple[list[np.ndarray], list[dict], TokenBudgetLoader]:
    """One optimizer step of SGD at rate 1 over a window of the whole epoch: what it subtracted."""
    loader = TokenBudgetLoader(_data(), max_tokens=BUDGET, seed=0)
    net = _model()
    before = [p.numpy().copy() for p in net.parameters()]
    learner = (LearnerBuilder(tmp_path / reduction).grads_accumulation(len(loader)).reduction(reduction)
               .accum_dtype("float64").progress("none").build(net, optim.SGD(1.0)))
    _, history = learner.fit(loader)
    return [b - p.numpy() for b, p in zip(before, net.parameters(), strict=True)], history.steps, loader


def test_a_window_of_uneven_budget_micro_batches_equals_one_batch_of_its_sequences_by_items(tmp_path: Path) -> None:
    moved, steps, loader = _window_step(tmp_path, "items")
    rows = [len(loader.indices(0, i)) for i in range(len(loader))]
    tokens = [int((loader.batch(0, i)[1] != -100).sum()) for i in range(len(loader))]
    assert len(set(rows)) > 1 and len(set(tokens)) > 1  # uneven in rows and in tokens
    assert steps[0]["micro_batches"] == len(loader) and steps[0]["items"] == sum(tokens)
    # one batch of the same 24 sentences, padded to the longest, its loss the mean over its tokens
    net = _model()
    inputs, targets = _data().get_batch(loader.order(0))
    grads = F.cross_entropy(net(inputs), targets, ignore_index=-100).backward()
    for step, p in zip(moved, net.parameters(), strict=True):
        np.testing.assert_allclose(step, grads[p], rtol=0, atol=1e-12)
    # a mean of micro-batch means weighs a token of a small micro-batch more: not the batch's gradient
    mean_moved, _, _ = _window_step(tmp_path, "mean")
    gap = max(float(np.abs(m - grads[p]).max()) for m, p in zip(mean_moved, net.parameters(), strict=True))
    assert gap > 1e-4


def _builder(directory: Path) -> LearnerBuilder:
    # 9 micro-batches an epoch, k = 4; a checkpoint every 3 micro-batches lands mid-window
    return (LearnerBuilder(directory).num_epochs(2).grads_accumulation(4).progress("none").accum_dtype("float64")
            .with_file_checkpointer(every_micro_batches=3))


def test_the_run_records_its_token_budget_and_a_resume_checks_it(tmp_path: Path) -> None:
    _builder(tmp_path).build(_model(), optim.AdamW(lr=0.01)).fit(TokenBudgetLoader(_data(), BUDGET, seed=0))
    (tmp_path / "final.safetensors").unlink()  # else the run is complete: nothing to resume
    checkpoint = _latest(tmp_path)
    state = json.loads((checkpoint / "state.json").read_text())["state"]
    assert state["settings"]["micro_batch"] == {"token_budget": BUDGET}
    assert state["accumulator"]["micro_step"] > 0  # mid-window: the resume counts the window's tokens
    with pytest.raises(SettingsMismatchError, match=r"micro_batch\.token_budget 160 -> 200"):
        _builder(tmp_path).build(_model(), optim.AdamW(lr=0.01)).fit(TokenBudgetLoader(_data(), 200, seed=0),
                                                                     resume=True)
    # the position is checked against the budget's micro-batches: a window's tokens edited by hand are refused
    def one_token_more(state: dict) -> None:
        state["accumulator"]["items"] += 1
        state["window"]["items"] += 1

    _resign(checkpoint, state=one_token_more)
    with pytest.raises(Exception, match=r"the window records \d+ items, but its micro-batches"):
        _builder(tmp_path).build(_model(), optim.AdamW(lr=0.01)).fit(TokenBudgetLoader(_data(), BUDGET, seed=0),
                                                                     resume=True)


def test_effective_batch_and_memory_budget_say_why_a_budget_loader_has_no_micro_batch_of_items(
        tmp_path: Path) -> None:
    loader = TokenBudgetLoader(_data(), BUDGET)
    learner = LearnerBuilder(tmp_path / "eff").effective_batch(8).progress("none").build(_model(), optim.SGD(0.1))
    with pytest.raises(ValueError, match=r"^effective_batch counts the items of a window in micro-batches of a fixed "
                                         r"size; the micro-batches of TokenBudgetLoader\(24 items, max_tokens=160, .*"
                                         r"set grads_accumulation \(k\), the micro-batches per window, instead$"):
        learner.fit(loader)
    learner = LearnerBuilder(tmp_path / "mem").memory_budget(1 << 20).progress("none").build(_model(), optim.SGD(0.1))
    with pytest.raises(MemoryBudgetError, match=r"^memory_budget chooses how many items a micro-batch holds; .* are "
                                                r"cut by its token budget: choose max_tokens to fit the memory "
                                                r"instead$"):
        learner.fit(loader)
