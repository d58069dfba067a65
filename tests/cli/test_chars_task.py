"""The chars task: a decoder-only transformer with a tied head over the shipped text; it is
causal, its one tied parameter gets both gradients, and it learns within a few steps."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import minitorch_accum as mta
from minitorch_accum.cli import main
from minitorch_accum.cli.tasks import load_task
from minitorch_accum.models import CharTransformer, TransformerConfig
from minitorch_accum.nn import functional as F


def test_the_head_and_the_token_embedding_are_one_parameter() -> None:
    mta.manual_seed(0)
    task = load_task("chars", block_size=16)
    model = task.model
    assert model.wte.weight is model.head.weight
    names = [name for name, _ in model.named_parameters()]
    assert "wte.weight" in names and "head.weight" not in names  # counted once
    vocab, width = task.train.vocab_size, model.config.n_embd
    blocks = model.config.n_layer * (4 * width + (3 * width * width + 3 * width) + (width * width + width)
                                     + (4 * width * width + 4 * width) + (4 * width * width + width))
    assert sum(p.size for p in model.parameters()) == vocab * width + 16 * width + blocks + 2 * width


def test_a_later_character_never_changes_an_earlier_prediction() -> None:
    mta.manual_seed(1)
    model = CharTransformer(TransformerConfig(vocab_size=11, block_size=12, n_layer=2, n_head=2, n_embd=8),
                            dtype="float64")
    ids = np.random.default_rng(0).integers(0, 11, size=(2, 12))
    changed = ids.copy()
    changed[:, 7:] = (changed[:, 7:] + 5) % 11
    before, after = model(ids).numpy(), model(changed).numpy()
    np.testing.assert_array_equal(before[:, :7], after[:, :7])  # positions 0..6 see only 0..6
    assert not np.allclose(before[:, 7:], after[:, 7:])


def test_the_tied_parameter_gets_the_gradient_of_both_uses() -> None:
    # gradient of the summed loss along a random direction of the tied matrix, against central
    # differences in float64: a head or an embedding dropping its share would miss it by far
    mta.manual_seed(2)
    model = CharTransformer(TransformerConfig(vocab_size=7, block_size=6, n_layer=1, n_head=2, n_embd=4),
                            dtype="float64")
    ids = np.random.default_rng(1).integers(0, 7, size=(3, 6))
    targets = np.random.default_rng(2).integers(0, 7, size=(3, 6))

    def loss() -> mta.Tensor:
        return F.cross_entropy(model(ids), targets, reduction="sum")

    tied = model.head.weight
    grad = np.asarray(loss().backward()[tied])
    direction = np.random.default_rng(3).normal(size=tied.shape)
    original = tied.numpy().copy()
    step = 1e-6
    values = []
    for sign in (1, -1):
        tied.data[...] = original + sign * step * direction
        values.append(loss().item())
    tied.data[...] = original
    np.testing.assert_allclose((values[0] - values[1]) / (2 * step), np.sum(grad * direction), rtol=1e-6)


def test_a_sequence_longer_than_the_block_is_refused() -> None:
    model = CharTransformer(TransformerConfig(vocab_size=5, block_size=4, n_layer=1, n_head=1, n_embd=4))
    with pytest.raises(ValueError, match="5 characters is longer than the block size 4"):
        model(np.zeros((1, 5), dtype=np.int64))


def test_training_chars_lowers_the_loss_in_a_few_steps(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    args = ["train", "--dataset", "chars", "--block-size", "16", "--micro-batch", "32", "--accum", "2",
            "--epochs", "1", "--lr", "0.01", "--out", str(tmp_path), "--progress", "none"]
    assert main(args) == 0
    steps = [json.loads(s) for s in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in steps if r["kind"] == "train"]
    # --block-size reached the data: a full window holds k x b x 16 target characters
    assert steps[0]["items"] == 2 * 32 * 16
    assert len(steps) >= 20
    # from about ln(58) = 4.06 (a uniform guess) to character statistics: well below it
    first, last = steps[0]["loss"], np.mean([r["loss"] for r in steps[-5:]])
    assert first > 3.9 and last < first - 0.5, (first, last)


def test_block_size_is_refused_for_a_task_without_a_context(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["train", "--dataset", "digits", "--block-size", "8", "--out", str(tmp_path),
                 "--progress", "none"]) == 2
    assert "--block-size applies to --dataset chars, not 'digits'" in capsys.readouterr().err
