"""The settings table: each row reaches the command line, the Learner's config, the record
of every checkpoint and the resume comparison; a resume may change exactly the rows that say so."""

from __future__ import annotations

import argparse
import dataclasses
import pickle
import types
import typing
from pathlib import Path
from typing import Any

import pytest

from minitorch_accum.cli.main import build_parser
from minitorch_accum.optim import SGD, AdamW
from minitorch_accum.train import LearnerBuilder
from minitorch_accum.train.run_settings import compare_settings, record_settings, upgrade_record
from minitorch_accum.train.setting_kinds import Choice, Flag, Integer, Kind, Number, Optional, positive_int
from minitorch_accum.train.settings import (
    SETTINGS,
    TRAINING_COMMANDS,
    LearnerConfig,
    learner_config,
    read_options,
    setting,
    typed_options,
)

RECORDED = [row for row in SETTINGS if row.target == "learner" and not row.resume]
# a second valid value of each recorded row
OTHER = {"grads_accumulation": 3, "effective_batch": 64, "accumulation_schedule": {0: 2, 3: 1},
         "seed": 7, "clip_grad_norm": 1.5, "mixed_precision": "bf16"}
# k is recorded only where it decides the windows: beside a schedule or an effective batch it is None
RECORDED_AS = {"accumulation_schedule": ["accumulation_schedule.0", "accumulation_schedule.3", "grads_accumulation"],
               "effective_batch": ["effective_batch", "grads_accumulation"]}


def _other(row: Any) -> Any:
    if row.name in OTHER:
        return OTHER[row.name]
    kind = row.kind.kind if isinstance(row.kind, Optional) else row.kind
    if isinstance(kind, Flag):
        return not row.default
    if isinstance(kind, Choice):
        return next(v for v in kind.values if v != row.default)
    raise AssertionError(f"give the test a second value for {row.name}")


def test_learner_config_has_one_field_per_learner_row_in_its_order_with_its_default() -> None:
    fields = [(f.name, f.default) for f in dataclasses.fields(LearnerConfig)]
    learner_rows = [(row.name, row.default) for row in SETTINGS if row.target == "learner"]
    assert fields == [("directory", dataclasses.MISSING), *learner_rows, ("run_config", None)]


def test_learner_config_fields_are_typed_as_their_rows_values() -> None:
    # each row's default (and a second value of each recorded row) is of its field's declared type
    hints = typing.get_type_hints(LearnerConfig)
    for row in SETTINGS:
        if row.target == "learner":
            values = [row.default] + ([row.check(_other(row))] if row in RECORDED else [])
            for value in values:
                assert _is_of(value, hints[row.name]), (row.name, value, hints[row.name])


def _is_of(value: Any, hint: Any) -> bool:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_is_of(value, arm) for arm in args)
    if origin is tuple:
        return isinstance(value, tuple) and all(_is_of(item, args[0]) for item in value)
    if origin is dict:
        return isinstance(value, dict) and all(_is_of(k, args[0]) and _is_of(v, args[1]) for k, v in value.items())
    if hint is float:
        return type(value) is float
    if hint is int:
        return type(value) is int
    return value is None if hint is type(None) else isinstance(value, hint)


def test_learner_config_takes_checked_values_as_they_are_and_records_the_task_rows() -> None:
    values = read_options(build_parser().parse_args(["train", "--accum", "3", "--lr", "0.1"]), "train")
    config = learner_config("runs/x", values)
    assert (config.directory, config.grads_accumulation, config.checkpoint_every_steps) == (Path("runs/x"), 3, 10)
    assert config.run_config == {"dataset": "digits", "lr": 0.1, "optimizer": "adamw", "dtype": "float32",
                                 "block_size": None}
    assert learner_config("runs/x", {"seed": 4}) == LearnerConfig(directory=Path("runs/x"), seed=4)


@pytest.mark.parametrize("row", RECORDED, ids=lambda row: row.name)
def test_every_recorded_setting_is_compared_on_resume(row: Any) -> None:
    config = LearnerConfig(directory=Path("run"))
    saved = record_settings(config, 16, 1, AdamW(lr=0.01))
    setattr(config, row.name, row.check(_other(row)))
    changes = compare_settings(saved, record_settings(config, 16, 1, AdamW(lr=0.01)))
    assert [name for name, _, _ in changes] == RECORDED_AS.get(row.name, [row.name])


def test_rows_a_resume_may_change_are_not_recorded() -> None:
    record = record_settings(LearnerConfig(directory=Path("run")), 16, 1, SGD(0.1))
    for row in SETTINGS:
        if row.resume:
            assert row.name not in record, row.name


def test_a_resume_with_another_clipping_norm_is_refused_end_to_end(tmp_path: Path) -> None:
    import numpy as np

    from minitorch_accum import manual_seed, nn
    from minitorch_accum.data import ArrayDataset, DataLoader
    from minitorch_accum.train import SettingsMismatchError

    def learner(norm: float) -> Any:
        manual_seed(0)
        model = nn.Sequential(nn.Linear(4, 3))
        return (LearnerBuilder(tmp_path).grads_accumulation(2).clip_grad_norm(norm).progress("none")
                .with_file_checkpointer(every_steps=1).build(model, SGD(0.1)))

    rng = np.random.default_rng(0)
    data = ArrayDataset(rng.normal(size=(40, 4)).astype(np.float32), rng.integers(0, 3, 40))
    learner(1.0).fit(DataLoader(data, 10))
    (tmp_path / "final.safetensors").unlink()  # as if stopped before its end: a complete run has nothing to resume
    with pytest.raises(SettingsMismatchError, match=r"clip_grad_norm 1.0 -> 2.0"):
        learner(2.0).fit(DataLoader(data, 10), resume=True)


def test_every_option_is_a_row_and_help_shows_its_default(capsys: pytest.CaptureFixture) -> None:
    parser = build_parser()
    for command in TRAINING_COMMANDS:
        with pytest.raises(SystemExit):
            parser.parse_args([command, "--help"])
        text = capsys.readouterr().out
        for row in SETTINGS:
            if row.flag is not None and command in row.commands:
                assert row.flag in text, (command, row.flag)
            elif row.flag is not None:
                assert f"{row.flag} " not in text, (command, row.flag)


def test_read_options_checks_each_option_and_gives_the_api_default_to_the_others() -> None:
    parser = build_parser()
    values = read_options(parser.parse_args(["compare", "--accum", "3"]), "compare")
    assert values["grads_accumulation"] == 3 and values["dataset"] == "chars" and values["out"] == "runs/compare"
    assert values["distributed"] is None and values["checkpoint_every_steps"] is None  # compare has no such options
    explain = read_options(parser.parse_args(["explain"]), "explain")
    assert (explain["grads_accumulation"], explain["micro_batch"], explain["dtype"]) == (4, 8, "float64")
    with pytest.raises(ValueError, match=r"^--block-size must be a positive int, got -2$"):
        read_options(parser.parse_args(["train", "--block-size", "-2"]), "train")


def test_the_builder_and_the_command_line_share_one_check() -> None:
    with pytest.raises(ValueError, match=r"^grads_accumulation \(k\) must be a positive int, got 0$"):
        LearnerBuilder("x").grads_accumulation(0)
    with pytest.raises(ValueError, match=r"^grads_accumulation \(k\) must be a positive int, got True$"):
        LearnerBuilder("x").grads_accumulation(True)
    with pytest.raises(ValueError, match=r"^clip_grad_norm must be a positive finite number, got nan$"):
        LearnerBuilder("x").clip_grad_norm(float("nan"))
    with pytest.raises(ValueError, match=r"^reduction must be one of mean, sum, items, mean_nominal, got 'avg'$"):
        LearnerBuilder("x").reduction("avg")
    assert setting("grads_accumulation").label(from_command_line=True) == "--accum (k)"
    assert positive_int("4") == 4
    with pytest.raises(argparse.ArgumentTypeError, match="must be a positive int, got 0"):
        positive_int("0")


@pytest.mark.parametrize(("kind", "good", "bad"), [
    (Integer(1), [1, 5], [0, -1, 1.5, True, "3"]),
    (Integer(0), [0, 2], [-1, None]),
    (Number(positive=True), [1e-9, 3], [0, -1.0, float("inf"), float("nan"), "1", False]),
    (Choice(("a", "b")), ["a", "b"], ["c", None, 1]),
    (Optional(Integer(1)), [None, 2], [0]),
])
def test_kinds_accept_and_refuse(kind: Any, good: list[Any], bad: list[Any]) -> None:
    for value in good:
        assert kind.check("x", value) == value
    for value in bad:
        with pytest.raises(ValueError, match=r"^x must be "):
            kind.check("x", value)


def test_a_record_of_before_the_table_compares_what_it_recorded() -> None:
    tableless = {"micro_batch": 16, "window_micro_batches": 3, "effective_batch": None, "accumulation_schedule": None,
                 "reduction": "items", "fusion": "gemm", "accum_dtype": "float32", "compensated": False,
                 "mixed_precision": None, "clip_grad_norm": None, "drop_last_window": False,
                 "optimizer": {"type": "SGD", **SGD(0.1).hyperparameters()},
                 "run": {"dataset": "digits", "micro_batch": 16, "accum": 3, "epochs": 1, "lr": 0.003,
                         "optimizer": "adamw", "reduction": "items", "fusion": "gemm", "dtype": "float32",
                         "compensated": False, "seed": 0, "block_size": None}}
    config = LearnerConfig(directory=Path("run"), grads_accumulation=3, seed=0,
                           run_config={"dataset": "digits", "lr": 0.003, "optimizer": "adamw", "dtype": "float32",
                                       "block_size": None})
    current = record_settings(config, 16, 1, SGD(0.1))
    upgraded = upgrade_record(tableless, 1)
    assert compare_settings(upgraded, current) == []
    assert upgraded["seed"] == 0 and "version" not in upgraded
    config.seed, config.run_config = 1, {**config.run_config, "lr": 0.1}
    assert [name for name, _, _ in compare_settings(upgraded, record_settings(config, 16, 1, SGD(0.1)))] == [
        "run.lr", "seed"]
    # a record without run. from the table's time: settings it lacks are not compared
    api_only = {key: value for key, value in tableless.items() if key != "run"}
    assert compare_settings(upgrade_record(api_only, 1), current) == []


@pytest.mark.parametrize(("kind", "description"), [
    (Kind(), "any value"), (Flag(), "true or false"), (Integer(), "an int"), (Integer(0), "a non-negative int"),
    (Integer(1), "a positive int"), (Integer(3), "an int of at least 3"), (Number(), "a finite number"),
    (Number(positive=True), "a positive finite number"), (Choice((2, 4)), "one of 2, 4"),
    (Optional(Flag()), "None or true or false"), (Optional(Kind()), "None or any value"),
])
def test_each_kind_describes_the_values_it_takes(kind: Any, description: str) -> None:
    assert kind.describe() == description


@pytest.mark.parametrize(("kind", "good", "bad", "message"), [
    (Integer(), -4, "3", "an int, got '3'"), (Integer(0), 0, -1, "a non-negative int, got -1"),
    (Integer(3), 3, 2, "an int of at least 3, got 2"), (Number(), -2.5, float("inf"), "a finite number, got inf"),
])
def test_a_refusal_says_which_values_the_kind_takes(kind: Any, good: Any, bad: Any, message: str) -> None:
    assert kind.check("x", good) == good
    with pytest.raises(ValueError, match=rf"^x must be {message}$"):
        kind.check("x", bad)


def test_positive_int_names_no_setting_in_its_argparse_error() -> None:
    with pytest.raises(argparse.ArgumentTypeError, match=r"^must be a positive int, got 0$"):
        positive_int("0")
    with pytest.raises(argparse.ArgumentTypeError, match=r"^must be a positive int, got 'two'$"):
        positive_int("two")


@pytest.mark.parametrize(("schedule", "error", "message"), [
    ({0: 2, -1: 3}, ValueError, r"^accumulation_schedule: epochs must be non-negative ints, got -1$"),
    ({0: 2, True: 3}, ValueError, r"^accumulation_schedule: epochs must be non-negative ints, got True$"),
    ({0: 2, "3": 3}, ValueError, r"^accumulation_schedule: epochs must be non-negative ints, got '3'$"),
    ({0: 2, 3: 0}, ValueError, r"^accumulation_schedule\[3\] \(k\) must be a positive int, got 0$"),
    ({1: 2}, ValueError, r"^accumulation_schedule needs an entry for epoch 0$"),
])
def test_an_accumulation_schedule_is_refused_naming_the_bad_entry(schedule: Any, error: type,
                                                                  message: str) -> None:
    with pytest.raises(error, match=message):
        setting("accumulation_schedule").check(schedule)


def test_devices_metrics_and_scheduler_are_checked_naming_the_setting() -> None:
    devices = setting("devices")
    assert devices.check(["cpu", "CUDA:1"]) == ("cpu", "cuda:1") and devices.check("cuda") == ("cuda:0",)
    with pytest.raises(ValueError, match=r"^devices needs at least one device$"):
        devices.check([])
    metrics = setting("metrics")
    assert metrics.check("loss") == ("loss",) and metrics.check(["lr", "loss", "lr"]) == ("lr", "loss")
    with pytest.raises(ValueError, match=r"^unknown metric 'ppl': expected one of loss, accuracy, items_per_second, "
                                         r"grad_norm, lr, peak_memory$"):
        metrics.check(["loss", "ppl"])
    with pytest.raises(TypeError, match=r"^lr_scheduler expects an LRScheduler, got int$"):
        setting("lr_scheduler").check(3)


def test_the_figure_is_a_png_file_name_whatever_the_case_of_its_suffix() -> None:
    figure = setting("figure")
    assert figure.check("out/window.png") == Path("out/window.png")
    assert figure.check(Path("W.PNG")) == Path("W.PNG")
    assert figure.check(None) is None
    for bad in ["window.svg", "png", 5]:
        with pytest.raises(ValueError, match=rf"^figure must be a file name ending in \.png, got {bad!r}$"):
            figure.check(bad)


def test_a_progress_setting_refusal_offers_the_modes_and_a_progress() -> None:
    with pytest.raises(ValueError, match=r"^progress must be one of auto, rich, plain, none, or a Progress, "
                                         r"got 'loud'$"):
        setting("progress").check("loud")


def test_learner_config_is_a_named_picklable_dataclass_of_this_module() -> None:
    config = LearnerConfig(directory=Path("run"), grads_accumulation=4)
    assert repr(config).startswith("LearnerConfig(directory=PosixPath('run'), grads_accumulation=4,")
    assert pickle.loads(pickle.dumps(config)) == config


def test_help_shows_each_options_help_line_and_its_values(capsys: pytest.CaptureFixture) -> None:
    parser = build_parser()
    for command in TRAINING_COMMANDS:
        with pytest.raises(SystemExit):
            parser.parse_args([command, "--help"])
        text = "".join(capsys.readouterr().out.split())  # argparse wraps lines anywhere between words
        for row in SETTINGS:
            if row.flag is not None and command in row.commands:
                assert "".join(row.help.split()) in text, (command, row.flag)
    with pytest.raises(SystemExit):
        parser.parse_args(["train", "--help"])
    usage = capsys.readouterr().out
    for shown in ["[--accum ACCUM]", "[--micro-batch MICRO_BATCH]", "[--reduction {mean,sum,items,mean_nominal}]",
                  "[--distributed {auto,mpi,nccl,local}]", "[--compensated]"]:
        assert shown in usage, shown


def test_typed_options_are_those_given_flags_included_and_not_those_left_at_their_defaults() -> None:
    parser = build_parser()
    assert typed_options(parser.parse_args(["train"])) == frozenset()
    args = parser.parse_args(["train", "--accum", "8", "--compensated", "--epochs=2", "--out", "x"])
    assert typed_options(args) == {"grads_accumulation", "compensated", "num_epochs", "out"}  # 8: typed, the default
    assert (args.grads_accumulation, args.compensated, args.num_epochs, args.reduction) == (8, True, 2, "items")


@pytest.mark.parametrize("option", [["--reduction", "avg"], ["--distributed", "tcp"]])
def test_a_value_outside_an_options_choices_is_an_argparse_error(option: list[str],
                                                                 capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["train", *option])
    assert f"argument {option[0]}: invalid choice: '{option[1]}'" in capsys.readouterr().err


def test_a_record_of_this_version_is_read_as_written() -> None:
    # a run. of today's version that happens to hold the names a tableless run recorded is not upgraded
    run = {name: 1 for name in ("dataset", "micro_batch", "accum", "epochs", "lr", "optimizer", "reduction",
                                "fusion", "dtype", "compensated", "seed", "block_size")}
    config = LearnerConfig(directory=Path("run"), seed=3, run_config=run)
    record = record_settings(config, 16, 1, SGD(0.1))
    assert upgrade_record(record, 1) == record
    assert compare_settings(record, record_settings(config, 16, 1, SGD(0.1))) == []


def test_a_tuple_compares_equal_to_the_list_a_checkpoint_gives_back() -> None:
    import json

    saved = json.loads(json.dumps(record_settings(LearnerConfig(directory=Path("run"), run_config={"hidden": [16, 3]}),
                                                  16, 1, AdamW(lr=0.01))))
    current = record_settings(LearnerConfig(directory=Path("run"), run_config={"hidden": (16, 3)}), 16, 1,
                              AdamW(lr=0.01))
    assert compare_settings(saved, current) == []
    other = record_settings(LearnerConfig(directory=Path("run"), run_config={"hidden": (16, 4)}), 16, 1,
                            AdamW(lr=0.01))
    assert compare_settings(saved, other) == [("run.hidden", [16, 3], [16, 4])]


def test_the_records_layout_version_is_not_a_setting() -> None:
    config = LearnerConfig(directory=Path("run"))
    current = record_settings(config, 16, 1, SGD(0.1))
    assert compare_settings({**current, "version": 4}, current) == []  # a layout of another version
    assert compare_settings({**current, "version": 4, "seed": 4}, current) == [("seed", 4, None)]


def test_a_row_added_since_a_record_takes_its_default_in_versioned_records_only() -> None:
    from minitorch_accum.train.run_settings import RECORD_VERSION

    current = {"version": RECORD_VERSION, "grads_accumulation": 2, "run": {}}
    assert upgrade_record(current, 1)["rounding"] == "nearest"  # written before the rounding row
    assert upgrade_record({**current, "rounding": "stochastic"}, 1)["rounding"] == "stochastic"
    version_2 = {"version": 2, "window_micro_batches": 4, "run": {}}
    upgraded = upgrade_record(version_2, 2)
    assert (upgraded["rounding"], upgraded["grads_accumulation"], upgraded["version"]) == ("nearest", 2, RECORD_VERSION)
    assert "rounding" not in upgrade_record({"reduction": "sum", "run": {}}, 1)  # before the table: as it was
