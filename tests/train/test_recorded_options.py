"""What ``maccum train --resume --out DIR`` takes from DIR's checkpoint: every option the run recorded,
read back as it was typed; only typed options over it; the options an old record lacks named; rank 0's
reading on every rank."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from minitorch_accum.cli import main
from minitorch_accum.cli.main import build_parser
from minitorch_accum.distributed import LocalCommunicator
from minitorch_accum.testing import run_ranks
from minitorch_accum.train import RunCompleteError, RunDirectoryError, SettingsMismatchError
from minitorch_accum.train.recorded_options import RecordedOptions, read_recorded_options, resumed_options
from minitorch_accum.train.settings import commanded, read_options, typed_options

# every option a resume takes from the record, none at its default (sequences: two windows, in a second)
STARTED = {"--dataset": "sequences", "--accum": "3", "--micro-batch": "16", "--reduction": "sum", "--fusion": "leaf",
           "--seed": "4", "--lr": "0.01", "--optimizer": "sgd", "--dtype": "float64", "--epochs": "1",
           "--checkpoint-every": "2"}


def _parsed(*argv: str) -> tuple[dict[str, Any], frozenset[str]]:
    args = build_parser().parse_args(["train", *argv])
    return read_options(args, "train"), typed_options(args)


def test_every_option_a_run_recorded_is_read_back_as_it_was_started(tmp_path: Path) -> None:
    argv = [*(part for pair in STARTED.items() for part in pair), "--compensated"]
    assert main(["train", *argv, "--out", str(tmp_path), "--progress", "none"]) == 0
    (tmp_path / "final.safetensors").unlink()  # as if stopped before its end
    started, _ = _parsed(*argv)
    recorded = read_recorded_options(tmp_path, LocalCommunicator())
    kept = {row.name for row in commanded("train") if not row.resume}
    assert kept <= set(recorded.values)  # every option a resume must keep (a new row's too) is recorded
    # --grad-dtype not given: the run resolved its arena to the model's dtype and recorded that
    expected = {name: started[name] for name in kept | {"num_epochs", "checkpoint_every_steps"}}
    assert started["accum_dtype"] is None
    assert recorded.values == {**expected, "accum_dtype": "float64"}
    assert recorded.values["compensated"] is True and recorded.values["block_size"] is None
    assert recorded.checkpoint == str(tmp_path / "checkpoints" / "step0000002-epoch0000-batch000005")


def test_only_typed_options_count_and_a_changed_epoch_count_is_said() -> None:
    recorded = RecordedOptions("ckpt", {"grads_accumulation": 3, "micro_batch": 16, "reduction": "sum",
                                        "fusion": "leaf", "compensated": True, "seed": 4, "dataset": "sequences",
                                        "lr": 0.01, "optimizer": "sgd", "dtype": "float64", "block_size": None,
                                        "num_epochs": 2, "checkpoint_every_steps": 2})
    values, typed = _parsed("--resume", "--out", "run")
    resumed, said = resumed_options(values, typed, recorded)
    assert {name: resumed[name] for name in recorded.values} == recorded.values and said is None
    assert resumed["progress"] == "auto" and resumed["out"] == "run"  # not recorded: this invocation's own
    # a typed option wins, even when it equals the default: --accum 8 is the command line's default
    values, typed = _parsed("--resume", "--out", "run", "--accum", "8", "--epochs", "3", "--checkpoint-every", "2")
    resumed, said = resumed_options(values, typed, recorded)
    assert (resumed["grads_accumulation"], resumed["num_epochs"], resumed["micro_batch"]) == (8, 3, 16)
    assert said == "resuming with --epochs 3 (was 2)"  # a kept option is compared by the resume, not said here


def test_an_option_the_record_lacks_is_named_unless_typed() -> None:
    first_layout = RecordedOptions("ckpt", {"reduction": "items", "fusion": "gemm", "num_epochs": 1})
    values, typed = _parsed("--resume", "--out", "run", "--lr", "0.01")
    with pytest.raises(SettingsMismatchError, match=r"^resume: the checkpoint ckpt does not record --accum, "
                       r"--micro-batch, --seed, --dataset, --optimizer, --dtype \(written by an earlier version, or "
                       r"not by maccum train\): give them as the run was started \(maccum train --resume --out run "
                       r"--accum \.\.\. --micro-batch \.\.\. "):
        resumed_options(values, typed, first_layout)
    values, typed = _parsed("--resume", "--out", "run", "--accum", "3", "--micro-batch", "16", "--seed", "0",
                            "--dataset", "digits", "--lr", "0.01", "--optimizer", "adamw", "--dtype", "float32")
    resumed, _ = resumed_options(values, typed, first_layout)
    assert resumed["compensated"] is False and resumed["block_size"] is None  # off, and the task's own


def test_rank_0_alone_reads_the_directory_and_every_rank_gets_its_reading(tmp_path: Path) -> None:
    assert main(["train", "--accum", "2", "--micro-batch", "256", "--epochs", "1", "--checkpoint-every", "1",
                 "--out", str(tmp_path / "run"), "--progress", "none"]) == 0
    (tmp_path / "run" / "final.safetensors").unlink()

    def read(comm: Any, run: str) -> Any:
        # rank 1 is given a directory that does not exist: another host, whose disk does not hold the run
        try:
            return read_recorded_options(tmp_path / (run if comm.rank == 0 else "elsewhere"), comm)
        except (RunDirectoryError, ValueError) as error:
            return f"{type(error).__name__}: {error}"

    zero, one = run_ranks(2, lambda comm: read(comm, "run"))
    assert zero == one and zero.values["micro_batch"] == 256
    zero, one = run_ranks(2, lambda comm: read(comm, "missing"))
    said = f"nothing to resume in {tmp_path / 'missing'}: it does not exist"
    assert (zero, one) == (f"RunDirectoryError: {said}", f"RankStartError: {said}")


def _state(settings: dict[str, Any] | None, world_size: int | None = None) -> dict[str, Any]:
    state: dict[str, Any] = {"config": {"reduction": "sum", "fusion": "leaf", "num_epochs": 2,
                                        "checkpoint_every_steps": 1}}
    if settings is not None:
        state["settings"] = settings
    if world_size is not None:
        state["world_size"] = world_size
    return state


def test_an_earlier_records_k_is_read_per_rank_and_a_bad_or_missing_row_skips_only_itself() -> None:
    from minitorch_accum.train.recorded_options import _values_of

    # version 2 recorded the window of every rank: 8 micro-batches over 2 ranks is k = 4 per rank
    version_2 = {"version": 2, "window_micro_batches": 8, "micro_batch": 16, "run": {"dataset": "digits"}}
    assert _values_of(_state(version_2, world_size=2))["grads_accumulation"] == 4
    assert _values_of(_state(version_2))["grads_accumulation"] == 8  # no world size recorded: one rank
    # the first layout recorded only reduction and fusion, in its config
    assert {k: v for k, v in _values_of(_state(None)).items()} == {
        "reduction": "sum", "fusion": "leaf", "num_epochs": 2, "checkpoint_every_steps": 1}
    # a row the record lacks, or holds a value its option refuses, is left to the command line; the next are read
    holes = {"version": 2, "window_micro_batches": "eight", "micro_batch": 16, "compensated": True,
             "seed": 3, "run": {"dataset": "digits", "lr": 0.5}}
    values = _values_of(_state(holes))
    assert "grads_accumulation" not in values and "reduction" not in values
    assert (values["micro_batch"], values["compensated"], values["seed"], values["dataset"], values["lr"]) == (
        16, True, 3, "digits", 0.5)


def test_a_complete_run_is_said_alike_on_every_rank(tmp_path: Path) -> None:
    assert main(["train", "--accum", "2", "--micro-batch", "256", "--epochs", "1", "--checkpoint-every", "1",
                 "--out", str(tmp_path), "--progress", "none"]) == 0

    def read(comm: Any) -> Any:
        try:
            read_recorded_options(tmp_path, comm)
        except RunCompleteError as complete:
            return type(complete).__name__, str(complete), complete.rank
        return None

    zero, one = run_ranks(2, read)
    assert zero[0] == one[0] == "RunCompleteError" and (zero[2], one[2]) == (0, 1)
    assert zero[1] == one[1] and zero[1].startswith(f"the run in {tmp_path} is complete (")


def test_one_option_the_record_lacks_is_it_and_two_changes_are_listed() -> None:
    lacks_seed = RecordedOptions("ckpt", {"grads_accumulation": 3, "micro_batch": 16, "reduction": "sum",
                                          "fusion": "leaf", "compensated": False, "dataset": "sequences",
                                          "lr": 0.01, "optimizer": "sgd", "dtype": "float64", "block_size": None,
                                          "accum_dtype": "float64", "num_epochs": 2, "checkpoint_every_steps": 2})
    values, typed = _parsed("--resume", "--out", "run")
    with pytest.raises(SettingsMismatchError, match=r"does not record --seed \(written by an earlier version, or "
                       r"not by maccum train\): give it as the run was started \(maccum train --resume --out run "
                       r"--seed \.\.\.\)$"):
        resumed_options(values, typed, lacks_seed)
    values, typed = _parsed("--resume", "--out", "run", "--seed", "1", "--epochs", "3", "--checkpoint-every", "1")
    _, said = resumed_options(values, typed, lacks_seed)
    assert said == "resuming with --epochs 3 (was 2), --checkpoint-every 1 (was 2)"
