"""The Learner replays each micro-batch's forward by default (the ``replay`` setting): a fit with
it and one without end bit for bit alike, metrics and parameters; ``maccum train`` too; the trace
says which micro-batches replayed; a step that cannot be replayed runs eagerly, said once."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from safetensors.numpy import load_file

import minitorch_accum as mta
from minitorch_accum import nn, optim
from minitorch_accum.cli import main
from minitorch_accum.data import ArrayDataset, DataLoader
from minitorch_accum.nn import functional as F
from minitorch_accum.train import Classifier, LearnerBuilder
from minitorch_accum.train.settings import setting
from minitorch_accum.train.step import TrainOutput, replayable
from tests.trace_events import check_trace_event_format, complete

# what differs between two runs that compute alike: clocks, and the memory probe (a replayed
# micro-batch drops each array after its last use, where the model's Python may hold it longer)
UNREPRODUCIBLE = {"accumulation_seconds", "step_seconds", "items_per_second", "peak_activation_bytes",
                  "peak_array_bytes", "peak_other_bytes"}


def dataset(n: int = 90, seed: int = 0) -> ArrayDataset:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 6))
    return ArrayDataset(x, (x[:, 0] + x[:, 1] > 0).astype(np.int64) + (x[:, 2] > 1).astype(np.int64))


def model(seed: int = 0) -> nn.Module:
    mta.manual_seed(seed)
    return nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Dropout(0.2), nn.Linear(16, 3))


def fit(directory: Path, replay: bool, step: Any = None, progress: str = "none", **options: Any) -> Any:
    builder = LearnerBuilder(directory).num_epochs(2).grads_accumulation(4).seed(1).progress(progress).replay(replay)
    for name, value in options.items():
        builder = getattr(builder, name)(value)
    learner = builder.build(step if step is not None else model(), optim.AdamW(lr=0.01))
    learner.fit(DataLoader(dataset(), 8, shuffle=True, seed=2), DataLoader(dataset(30, 5), 10, shuffle=False))
    return learner


def metrics(directory: Path) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in (directory / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in line.items() if k not in UNREPRODUCIBLE} for line in lines]


@pytest.mark.parametrize("fusion", ["gemm", "none"])
def test_a_replayed_fit_is_an_eager_one_bit_for_bit(tmp_path: Path, fusion: str) -> None:
    eager = fit(tmp_path / "eager", False, fusion=fusion)
    replayed = fit(tmp_path / "replayed", True, fusion=fusion)
    assert eager.replay is None
    # 12 micro-batches an epoch (the last one of 2 rows: its own key), two epochs
    assert replayed.replay.counts == {"captured": 2, "checked": 2, "replayed": 20, "eager": 0}
    assert metrics(tmp_path / "replayed") == metrics(tmp_path / "eager")
    # and never more memory: a replay drops each array after its last use
    peaks = [[line["peak_array_bytes"] for line in map(json.loads, (tmp_path / run / "metrics.jsonl").read_text()
                                                         .splitlines()) if line["kind"] == "train"]
             for run in ("eager", "replayed")]
    assert all(r <= e for e, r in zip(*peaks, strict=True))
    for (name, a), (_, b) in zip(eager.model.named_parameters(), replayed.model.named_parameters(), strict=True):
        assert np.array_equal(a.numpy(), b.numpy()), name


def test_the_trace_says_how_each_micro_batch_ran(tmp_path: Path) -> None:
    fit(tmp_path / "run", True, trace=tmp_path / "run.trace.json")
    events = check_trace_event_format(json.loads((tmp_path / "run.trace.json").read_text()))
    forwards = complete(events, "forward")
    backwards = complete(events, "backward")
    assert len(forwards) == len(backwards) == 24
    ran = [e["args"]["replay"] for e in forwards]
    assert ran[:3] == ["captured", "checked", "replayed"] and ran.count("replayed") == 20
    assert [e["args"]["replay"] for e in backwards] == ran


class Counting(Classifier):
    """A step whose train_step does more than its parts: it is not replayed."""

    def __init__(self, module: nn.Module) -> None:
        super().__init__(module)
        self.calls = 0

    def train_step(self, batch: Any) -> TrainOutput:
        self.calls += 1
        return super().train_step(batch)


class MeanOfValid(Classifier):
    """A step whose forward divides by a count it takes in Python from the targets: refused."""

    def step_forward(self, x: Any, targets: Any) -> Any:
        logits = self(x)
        valid = float((np.asarray(targets) > 0).sum() or 1)
        return F.cross_entropy(logits, targets, reduction="sum") * (1.0 / valid), logits


def test_a_step_that_cannot_be_replayed_runs_eagerly_and_says_why_once(tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture) -> None:
    assert replayable(Classifier(model())) and not replayable(Counting(model()))
    counting = fit(tmp_path / "counting", True, Counting(model()), progress="plain")
    assert counting.replay is None and counting.step_model.calls == 24
    assert capsys.readouterr().out.count("replay: Counting's train_step is not its step_inputs") == 1
    refused = fit(tmp_path / "refused", True, MeanOfValid(model()), progress="plain")
    assert refused.replay.counts["replayed"] == 0
    said = [line for line in capsys.readouterr().out.splitlines() if "replay:" in line]
    assert len(said) == 1 and "(mul)" in said[0] and "differed between two calls" in said[0]


def test_the_setting_is_on_by_default_and_off_with_no_replay() -> None:
    assert setting("replay").default is True
    parser_values = []
    for flags in ([], ["--no-replay"], ["--replay"]):
        from minitorch_accum.cli.main import build_parser
        from minitorch_accum.train.settings import read_options

        args = build_parser().parse_args(["train", *flags])
        parser_values.append(read_options(args, "train")["replay"])
    assert parser_values == [True, False, True]


def test_maccum_train_replays_by_default_and_ends_as_without(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    finals = []
    for flags in ([], ["--no-replay"]):
        out = tmp_path / ("default" if not flags else "eager")
        out.mkdir()  # --trace-out's directory must exist
        assert main(["train", "--dataset", "digits", "--micro-batch", "128", "--accum", "3", "--epochs", "1",
                     "--out", str(out), "--progress", "none", "--trace-out", str(out / "t.json"), *flags]) == 0
        finals.append(load_file(str(out / "final.safetensors")))
        events = json.loads((out / "t.json").read_text())["traceEvents"]
        ran = {e.get("args", {}).get("replay") for e in events if e.get("name") == "forward"}
        assert ran == ({"captured", "checked", "replayed"} if not flags else {None})
    assert finals[0].keys() == finals[1].keys()
    for name in finals[0]:
        assert np.array_equal(finals[0][name], finals[1][name]), name
