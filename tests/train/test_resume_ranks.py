"""A resume on another number of data-parallel ranks, in one process (ranks on threads): the
global window is what must stay, so k per rank (and each epoch's k of a schedule) is re-derived
and the run trains as the uninterrupted one; what cannot keep the window is refused by name.

The runs sum in float64 with compensation over leaf gradients, so a window summed on one rank
or over two gives the same bits and the parameters are compared exactly."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import minitorch_accum as mta
from minitorch_accum import nn, optim
from minitorch_accum.data import ArrayDataset, DataLoader
from minitorch_accum.testing import run_ranks
from minitorch_accum.testing.simulated_ranks import RankFailedError, ThreadCommunicator
from minitorch_accum.train import LearnerBuilder, TrainingInterrupted
from tests.train.stopping_models import StopAt

Params = dict[str, np.ndarray]


def _data() -> ArrayDataset:
    # 60 items in micro-batches of 4: 15 per epoch, windows of 6 micro-batches: 6, 6, 3
    rng = np.random.default_rng(0)
    x = rng.normal(size=(60, 6))
    return ArrayDataset(x, (x[:, 0] + x[:, 1] > 0).astype(np.int64))


def _loader() -> DataLoader:
    return DataLoader(_data(), 4, seed=3)


def _mlp() -> nn.Module:
    mta.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 8, dtype="float64"), nn.Tanh(), nn.Linear(8, 3, dtype="float64"))


def _builder(directory: Path, k: int, epochs: int, comm: ThreadCommunicator | None = None, *,
             zero: bool = False, progress: str = "none", **options: Any) -> LearnerBuilder:
    builder = (LearnerBuilder(directory).num_epochs(epochs).grads_accumulation(k).progress(progress)
               .accum_dtype("float64").compensated(True).fusion("leaf").with_file_checkpointer(every_steps=3))
    for name, value in options.items():
        builder = getattr(builder, name)(value)
    return builder if comm is None else builder.distributed(comm, zero=zero)


def _params(module: nn.Module) -> Params:
    return {name: p.numpy().copy() for name, p in module.named_parameters()}


def _one_rank(directory: Path, k: int, epochs: int, resume: bool = False, **options: Any) -> tuple[Params, Any]:
    learner = _builder(directory, k, epochs, **options).build(_mlp(), optim.AdamW(lr=0.01))
    trained, _ = learner.fit(_loader(), resume=resume)
    return _params(trained), learner


def _two_ranks(directory: Path, k: int, epochs: int, resume: bool = False, model: Any = None,
               **options: Any) -> list[tuple[Params, Any]]:
    models = [model(_mlp()) if model else _mlp() for _ in range(2)]  # built here: threads share one generator

    def rank(comm: ThreadCommunicator) -> tuple[Params, Any]:
        learner = _builder(directory, k, epochs, comm, **options).build(models[comm.rank], optim.AdamW(lr=0.01))
        trained, _ = learner.fit(_loader(), resume=resume)
        return _params(trained), learner

    return run_ranks(2, rank)


def _assert_same(got: Params, want: Params, what: str) -> None:
    assert sorted(got) == sorted(want)
    for name in want:
        np.testing.assert_array_equal(got[name], want[name], err_msg=f"{what}: {name}")


def _state(directory: Path) -> dict[str, Any]:
    checkpoints = directory / "checkpoints"
    return json.loads((checkpoints / (checkpoints / "latest").read_text().strip() / "state.json").read_text())["state"]


@pytest.fixture(scope="module")
def whole(tmp_path_factory: pytest.TempPathFactory) -> Params:
    """Two epochs on one rank, k = 6, never interrupted."""
    params, _ = _one_rank(tmp_path_factory.mktemp("whole"), 6, 2)
    return params


def test_a_one_rank_run_resumed_on_two_ranks_halves_k_and_trains_as_the_whole_run(
        tmp_path: Path, whole: Params, capsys: pytest.CaptureFixture) -> None:
    _one_rank(tmp_path, 6, 1)  # epoch 0; its last step (3) is checkpointed
    capsys.readouterr()
    ranks = _two_ranks(tmp_path, 6, 2, resume=True, progress="plain")
    out = capsys.readouterr().out
    assert ("resuming a run of 1 rank(s) on 2: k per rank 6 -> 3, so each window keeps 6 micro-batches "
            "of 4 items") in out
    assert f"resumed from step 3 (epoch 1, micro-batch 0) of {tmp_path / 'checkpoints'}" in out
    for rank, (params, learner) in enumerate(ranks):
        assert learner.config.grads_accumulation == 3 and learner.step == 6
        _assert_same(params, whole, f"rank {rank}")
    # the checkpoint the resumed run wrote records k per rank beside the ranks (the window is derived)
    settings = _state(tmp_path)["settings"]
    assert (settings["grads_accumulation"], settings["world_size"]) == (3, 2)
    assert "window_micro_batches" not in settings


def test_a_two_rank_run_resumed_on_one_rank_doubles_k_and_keeps_its_own_random_stream(
        tmp_path: Path, whole: Params, capsys: pytest.CaptureFixture) -> None:
    _two_ranks(tmp_path, 3, 1)
    state = _state(tmp_path)
    assert state["world_size"] == 2 and len(state["rng_ranks"]) == 2
    learner = _builder(tmp_path, 3, 2, progress="plain").build(_mlp(), optim.AdamW(lr=0.01))
    mta.manual_seed(999)
    own = mta.get_rng_state()
    capsys.readouterr()
    trained, _ = learner.fit(_loader(), resume=True)
    params = _params(trained)
    assert "resuming a run of 2 rank(s) on 1: k per rank 3 -> 6, so each window keeps 6" in capsys.readouterr().out
    assert learner.config.grads_accumulation == 6
    _assert_same(params, whole, "one rank")
    # another number of ranks: the checkpoint's streams belong to ranks that are gone
    assert mta.get_rng_state() == own


def test_a_two_rank_run_resumed_on_two_ranks_restores_the_checkpoints_random_stream(
        tmp_path: Path, whole: Params) -> None:
    _two_ranks(tmp_path, 3, 1)
    saved = _state(tmp_path)["rng_ranks"]
    mta.manual_seed(999)
    ranks = _two_ranks(tmp_path, 3, 2, resume=True)
    for rank, (params, learner) in enumerate(ranks):
        assert learner.config.grads_accumulation == 3
        _assert_same(params, whole, f"rank {rank}")
    # the ranks are threads of one process, sharing one generator: it holds the (one) saved stream
    assert mta.get_rng_state() in saved


def test_a_k_already_divided_by_the_ranks_is_kept_and_another_k_is_refused(tmp_path: Path, whole: Params,
                                                                           capsys: pytest.CaptureFixture) -> None:
    _one_rank(tmp_path, 6, 1)
    with pytest.raises(RankFailedError,
                       match=r"other settings: grads_accumulation 6 x 1 rank\(s\) -> 4 x 2 rank\(s\);"):
        _two_ranks(tmp_path, 4, 2, resume=True)
    capsys.readouterr()
    ranks = _two_ranks(tmp_path, 3, 2, resume=True, progress="plain")  # 2 ranks x 3 already make the window
    assert "k per rank" not in capsys.readouterr().out
    for rank, (params, learner) in enumerate(ranks):
        assert learner.config.grads_accumulation == 3
        _assert_same(params, whole, f"rank {rank}")


def test_an_accumulation_schedule_is_re_derived_per_rank(tmp_path: Path) -> None:
    schedule = {0: 6, 1: 2}
    # k is left at its default, 1: the schedule decides every window, and a checkpoint records what it decides
    reference, _ = _one_rank(tmp_path / "whole", 1, 3, accumulation_schedule=schedule)
    _one_rank(tmp_path / "run", 1, 1, accumulation_schedule=schedule)
    assert _state(tmp_path / "run")["settings"]["accumulation_schedule"] == {"0": 6, "1": 2}
    ranks = _two_ranks(tmp_path / "run", 1, 3, resume=True, accumulation_schedule=schedule)
    for rank, (params, learner) in enumerate(ranks):
        assert learner.config.accumulation_schedule == {0: 3, 1: 1}
        assert all(type(k) is int for k in learner.config.accumulation_schedule.values())
        _assert_same(params, reference, f"rank {rank}")
    # and back: two ranks' schedule of {0: 3, 1: 1} is one rank's {0: 6, 1: 2}
    _two_ranks(tmp_path / "back", 1, 1, accumulation_schedule={0: 3, 1: 1})
    params, learner = _one_rank(tmp_path / "back", 1, 3, resume=True, accumulation_schedule={0: 3, 1: 1})
    assert learner.config.accumulation_schedule == {0: 6, 1: 2}
    _assert_same(params, reference, "one rank")


def _as_version_2_wrote(directory: Path) -> dict[str, Any]:
    """The latest checkpoint's settings rewritten (and re-sealed) as version 2 wrote them: the window
    of all ranks as ``window_micro_batches`` (k x ranks, even beside a schedule, which held k x ranks
    per epoch), no ``world_size`` in the settings; returns them."""
    from minitorch_accum.train.checkpoint.record import record_checksum

    checkpoints = directory / "checkpoints"
    path = checkpoints / (checkpoints / "latest").read_text().strip() / "state.json"
    record = json.loads(path.read_text())
    settings, world = record["state"]["settings"], record["state"]["world_size"]
    k, schedule = settings.pop("grads_accumulation"), settings["accumulation_schedule"]
    settings.update(version=2, window_micro_batches=None if settings["effective_batch"] else (k or 1) * world)
    del settings["world_size"]
    if schedule is not None:
        settings["accumulation_schedule"] = {epoch: value * world for epoch, value in schedule.items()}
    body = {key: value for key, value in record.items() if key != "record_sha256"}
    path.write_text(json.dumps({**body, "record_sha256": record_checksum(body)}))
    return settings


def test_a_version_2_record_of_two_ranks_resumes_on_one_rank(tmp_path: Path, whole: Params,
                                                             capsys: pytest.CaptureFixture) -> None:
    _two_ranks(tmp_path, 3, 1)
    assert _as_version_2_wrote(tmp_path)["window_micro_batches"] == 6
    capsys.readouterr()
    params, learner = _one_rank(tmp_path, 3, 2, resume=True, progress="plain")
    assert "resuming a run of 2 rank(s) on 1: k per rank 3 -> 6, so each window keeps 6" in capsys.readouterr().out
    assert learner.config.grads_accumulation == 6
    _assert_same(params, whole, "one rank")
    # what it writes is today's record
    settings = _state(tmp_path)["settings"]
    assert (settings["version"], settings["grads_accumulation"], settings["world_size"]) == (3, 6, 1)


def test_a_version_2_record_with_a_schedule_resumes_on_another_number_of_ranks(tmp_path: Path) -> None:
    reference, _ = _one_rank(tmp_path / "whole", 1, 3, accumulation_schedule={0: 6, 1: 2})
    _two_ranks(tmp_path / "run", 1, 1, accumulation_schedule={0: 3, 1: 1})
    saved = _as_version_2_wrote(tmp_path / "run")
    assert (saved["window_micro_batches"], saved["accumulation_schedule"]) == (2, {"0": 6, "1": 2})
    params, learner = _one_rank(tmp_path / "run", 1, 3, resume=True, accumulation_schedule={0: 3, 1: 1})
    assert learner.config.accumulation_schedule == {0: 6, 1: 2}
    _assert_same(params, reference, "one rank")


def test_a_schedule_dropped_on_another_number_of_ranks_is_refused(tmp_path: Path) -> None:
    _one_rank(tmp_path, 1, 1, accumulation_schedule={0: 6, 1: 2})
    with pytest.raises(RankFailedError, match=r"other settings: accumulation_schedule.0 6 x 1 rank\(s\) -> None, "
                                              r"accumulation_schedule.1 2 x 1 rank\(s\) -> None, "
                                              r"grads_accumulation None -> 6 x 2 rank\(s\)"):
        _two_ranks(tmp_path, 6, 2, resume=True)


def test_a_mid_window_checkpoint_resumed_on_another_number_of_ranks_is_refused(tmp_path: Path) -> None:
    learner = (_builder(tmp_path, 6, 1).with_file_checkpointer(every_micro_batches=4)
               .build(_mlp(), optim.AdamW(lr=0.01)))
    learner.fit(_loader())
    assert _state(tmp_path)["accumulator"]["micro_step"] == 2  # micro-batch 14 of 15: 2 into the last window
    with pytest.raises(RankFailedError, match=r"the checkpoint was taken mid-window by 1 process\(es\); resume it "
                                              r"with 1, or from a checkpoint taken at a window boundary"):
        _two_ranks(tmp_path, 6, 2, resume=True)


def test_a_window_the_ranks_cannot_share_equally_is_refused(tmp_path: Path) -> None:
    _one_rank(tmp_path, 3, 1)
    with pytest.raises(RankFailedError, match=r"the checkpoint's window holds 3 micro-batches \(1 rank\(s\) x k=3\), "
                                              r"which 2 ranks cannot share equally; resume with a number of ranks "
                                              r"that divides 3"):
        _two_ranks(tmp_path, 3, 2, resume=True)


def test_a_zero1_checkpoint_of_two_ranks_resumes_on_one_rank(tmp_path: Path, whole: Params) -> None:
    _two_ranks(tmp_path, 3, 1, zero=True)
    params, learner = _one_rank(tmp_path, 3, 2, resume=True)
    assert learner.optimizer.step_count == 6
    _assert_same(params, whole, "one rank")


def test_a_data_parallel_stop_at_a_periodic_checkpoint_does_not_save_it_twice(tmp_path: Path,
                                                                              whole: Params) -> None:
    learners: dict[int, Any] = {}

    def rank_1_asks() -> None:  # as Ctrl-C would, in its own stop request
        learners[1].stop_request.signal = signal.SIGINT

    models = [StopAt(_mlp(), at=0), StopAt(_mlp(), at=3, stop=rank_1_asks)]  # rank 1 asks during the first window

    def rank(comm: ThreadCommunicator) -> TrainingInterrupted:
        learner = (_builder(tmp_path, 3, 2, comm).with_file_checkpointer(every_steps=1)
                   .build(models[comm.rank], optim.AdamW(lr=0.01)))
        learners[comm.rank] = learner
        with pytest.raises(TrainingInterrupted) as stopped:
            learner.fit(_loader())
        return stopped.value

    stops = run_ranks(2, rank)
    assert [stop.step for stop in stops] == [1, 1]
    first = tmp_path / "checkpoints" / "step0000001-epoch0000-batch000006"
    assert [p for p in (tmp_path / "checkpoints").iterdir() if p.is_dir()] == [first]
    assert Path(stops[0].checkpoint) == first
    params, _ = _one_rank(tmp_path, 3, 2, resume=True)
    _assert_same(params, whole, "resumed")
