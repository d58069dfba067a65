"""Training with a bfloat16 gradient arena rounded stochastically: a run interrupted mid-window and
resumed equals the uninterrupted one bit for bit (the checkpoint holds the stream's state), the
seed decides the bits, and the rounding is a setting a resume must keep."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from minitorch_accum import optim
from minitorch_accum.data import DataLoader
from minitorch_accum.train import LearnerBuilder, SettingsMismatchError
from tests.train.stopping_models import StopAt
from tests.train.test_learner import dataset, model


def _builder(rounding: str = "stochastic", seed: int = 5, epochs: int = 2):
    def builder(directory: Path) -> LearnerBuilder:
        return (LearnerBuilder(directory).num_epochs(epochs).grads_accumulation(4).accum_dtype("bfloat16")
                .rounding(rounding).seed(seed).progress("none").with_file_checkpointer(every_steps=2))
    return builder


def _loader() -> DataLoader:
    return DataLoader(dataset(), 8, seed=1)


def test_a_bfloat16_stochastic_run_resumed_mid_window_is_bit_identical(tmp_path: Path) -> None:
    builder = _builder()
    reference, _ = builder(tmp_path / "ref").build(model("float32"), optim.AdamW(lr=0.05)).fit(_loader())
    killed = builder(tmp_path / "run").build(StopAt(model("float32"), at=18), optim.AdamW(lr=0.05))
    with pytest.raises(KeyboardInterrupt):
        killed.fit(_loader())
    saved = (tmp_path / "run" / "checkpoints" / "latest").read_text().strip()
    # epoch 1, after 5 of its 13 micro-batches: window 5 (epoch 0 held 4, the last of one) holds 1
    assert saved.endswith("batch000005")
    state = json.loads((tmp_path / "run" / "checkpoints" / saved / "state.json").read_text())
    stream = _find(state, "rounding")  # the generator's state: seed, window, each view's draws
    assert stream["seed"] == 5 and stream["window"] == 5 and set(stream["draws"].values()) == {1}
    resumed = builder(tmp_path / "run").build(model("float32", seed=99), optim.AdamW(lr=0.05))
    final, history = resumed.fit(_loader(), resume=True)
    assert [r["step"] for r in history.steps] == list(range(1, 9))
    for (name, a), (_, b) in zip(reference.named_parameters(), final.named_parameters(), strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=name)


def _find(tree: object, key: str) -> dict:
    """The first dict under ``key`` anywhere in a JSON tree."""
    if isinstance(tree, dict):
        if isinstance(tree.get(key), dict):
            return tree[key]
        for value in tree.values():
            found = _find(value, key)
            if found:
                return found
    return {}


def test_the_seed_decides_the_rounding(tmp_path: Path) -> None:
    finals = []
    for name, rounding, seed in (("a", "stochastic", 5), ("b", "stochastic", 5), ("c", "stochastic", 6),
                                 ("d", "nearest", 5)):
        net, _ = _builder(rounding, seed)(tmp_path / name).build(model("float32"), optim.AdamW(lr=0.05)).fit(_loader())
        finals.append(np.concatenate([p.numpy().reshape(-1) for p in net.parameters()]))
    assert np.array_equal(finals[0], finals[1])
    assert not np.array_equal(finals[0], finals[2]) and not np.array_equal(finals[0], finals[3])


def test_a_resume_must_keep_the_rounding(tmp_path: Path) -> None:
    _builder()(tmp_path).build(model("float32"), optim.AdamW(lr=0.05)).fit(_loader())
    # a longer run: a complete one has nothing to resume
    resumed = _builder("nearest", epochs=3)(tmp_path).build(model("float32"), optim.AdamW(lr=0.05))
    with pytest.raises(SettingsMismatchError, match="rounding 'stochastic' -> 'nearest'"):
        resumed.fit(_loader(), resume=True)
