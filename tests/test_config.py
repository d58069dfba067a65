"""Burn-style Config: dataclass fields saved to and loaded from JSON."""

from __future__ import annotations

import dataclasses
import errno
import os
import re
from fractions import Fraction
from pathlib import Path
from typing import Any, Literal

import pytest

from minitorch_accum.config import ConfigError, config


@config
class TrainingConfig:
    lr: float = 1e-3
    accum: int = 8
    betas: tuple[float, float] = (0.9, 0.999)
    name: str = "run"


def test_config_round_trip(tmp_path: Path) -> None:
    original = TrainingConfig(lr=3e-4, accum=4)
    original.save(tmp_path / "nested" / "run.json")
    loaded = TrainingConfig.load(tmp_path / "nested" / "run.json")
    assert loaded == original and isinstance(loaded.betas, tuple)


def test_config_errors_name_the_problem(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        TrainingConfig.load(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ConfigError, match="is not valid JSON"):
        TrainingConfig.load(bad)
    extra = tmp_path / "extra.json"
    extra.write_text('{"lr": 0.1, "momentum": 0.9}')
    with pytest.raises(ConfigError, match=r"unknown field\(s\) momentum"):
        TrainingConfig.load(extra)


def test_config_save_fsyncs_the_file_before_the_rename_and_the_directory_after(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    events: list[tuple[str, str]] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    def replace(source: os.PathLike, target: os.PathLike) -> None:
        events.append(("replace", f"{source} -> {target}"))
        real_replace(source, target)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    TrainingConfig(lr=3e-4).save(tmp_path / "run.json")
    [(_, written), (_, renamed), (_, directory)] = events
    assert [kind for kind, _ in events] == ["fsync", "replace", "fsync"]
    # what a kill during the write leaves is hidden and says it is temporary
    assert Path(written).parent == tmp_path and Path(written).name.startswith(".run.json.")
    assert Path(written).name.endswith(".tmp")
    assert renamed == f"{written} -> {tmp_path / 'run.json'}"
    assert directory == str(tmp_path)
    assert TrainingConfig.load(tmp_path / "run.json").lr == 3e-4


def test_a_failing_config_write_leaves_the_old_file_intact(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    TrainingConfig(lr=3e-4).save(tmp_path / "run.json")

    def full_disk(fd: int, data: bytes) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "write", full_disk)
    with pytest.raises(OSError, match=r"No space left on device"):
        TrainingConfig(lr=1.0, accum=2).save(tmp_path / "run.json")
    assert [path.name for path in tmp_path.iterdir()] == ["run.json"]  # no temporary file left
    assert TrainingConfig.load(tmp_path / "run.json") == TrainingConfig(lr=3e-4)


@config
class Optimizer:
    name: str = "adamw"
    betas: tuple[float, float] = (0.9, 0.999)


@config
class RunConfig:
    lr: float = 1e-3
    accum: int = 8
    optimizer: Optimizer = dataclasses.field(default_factory=Optimizer)
    schedule: dict[str, int] | None = None
    tags: list[str] = dataclasses.field(default_factory=list)
    device: Literal["cpu", "cuda"] = "cpu"
    warmup: int | None = None


def _load(tmp_path: Path, content: str | bytes, cls: type = RunConfig):
    path = tmp_path / "run.json"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return cls.load(path)


@pytest.mark.parametrize("content, field, message", [
    ('{"lr": "fast"}', "RunConfig.lr", "must be a number, got str 'fast'"),
    ('{"lr": true}', "RunConfig.lr", "must be a number, got bool True"),
    ('{"accum": 2.5}', "RunConfig.accum", "must be an int, got float 2.5"),
    ('{"optimizer": {"betas": "abc"}}', "RunConfig.optimizer.betas", r"must be a list \(a tuple\), got str 'abc'"),
    ('{"optimizer": {"betas": [0.9]}}', "RunConfig.optimizer.betas", "must hold 2 values, got 1"),
    ('{"optimizer": {"betas": [0.9, "x"]}}', r"RunConfig.optimizer.betas\[1\]", "must be a number, got str 'x'"),
    ('{"optimizer": {"momentum": 0.9}}', "RunConfig.optimizer:", r"unknown field\(s\) momentum"),
    ('{"optimizer": [1, 2]}', "RunConfig.optimizer", "must be a JSON object, got a list"),
    ('{"schedule": {"0": "many"}}', r"RunConfig.schedule\['0'\]", "must be an int, got str 'many'"),
    ('{"tags": "a,b"}', "RunConfig.tags", "must be a list, got str 'a,b'"),
    ('{"device": "tpu"}', "RunConfig.device", "must be one of 'cpu', 'cuda', got str 'tpu'"),
    ('{"warmup": "soon"}', "RunConfig.warmup", "must be an int, got str 'soon'"),
])
def test_config_files_are_checked_against_the_field_types(tmp_path: Path, content: str, field: str,
                                                          message: str) -> None:
    with pytest.raises(ConfigError, match=rf"^config file {re.escape(str(tmp_path))}/run\.json: {field} {message}$"):
        _load(tmp_path, content)


def test_well_typed_config_files_load_with_their_types(tmp_path: Path) -> None:
    loaded = _load(tmp_path, '{"lr": 1, "optimizer": {"betas": [0.8, 0.9]}, "schedule": {"0": 4}, "warmup": null, '
                             '"tags": ["a"], "device": "cuda"}')
    assert loaded == RunConfig(lr=1.0, optimizer=Optimizer(betas=(0.8, 0.9)), schedule={"0": 4}, tags=["a"],
                               device="cuda")
    assert isinstance(loaded.lr, float) and isinstance(loaded.optimizer, Optimizer)
    assert RunConfig.load(_save(tmp_path, loaded)) == loaded


def _save(tmp_path: Path, value: RunConfig) -> Path:
    value.save(tmp_path / "again.json")
    return tmp_path / "again.json"


@pytest.mark.parametrize("content, message", [
    (b'{"lr": "\xff\xfe"}', r"is not UTF-8 text \(byte 8: b'\\xff'\)"),
    ("[" * 100_000 + "]" * 100_000, "nests its JSON deeper than 64 levels"),
    ('{"tags": ' + "[" * 70 + "]" * 70 + "}", "nests its JSON deeper than 64 levels"),
    ("[1, 2]", "must hold a JSON object, got a list"),
    ('"lr"', "must hold a JSON object, got str 'lr'"),
    ("", "is not valid JSON"),
])
def test_unreadable_config_files_raise_config_error_naming_the_file(tmp_path: Path, content: str | bytes,
                                                                    message: str) -> None:
    with pytest.raises(ConfigError, match=rf"^config file {re.escape(str(tmp_path))}/run\.json {message}"):
        _load(tmp_path, content)


def test_a_directory_as_config_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"cannot be read: Is a directory"):
        RunConfig.load(tmp_path)


def test_a_saved_config_is_stable_text_one_field_per_line_in_name_order(tmp_path: Path) -> None:
    # the same config always saves to the same bytes, and a hand edit or a diff sees one field per line
    TrainingConfig(lr=0.5, accum=2).save(tmp_path / "run.json")
    assert (tmp_path / "run.json").read_text(encoding="utf-8") == (
        '{\n  "accum": 2,\n  "betas": [\n    0.9,\n    0.999\n  ],\n  "lr": 0.5,\n  "name": "run"\n}')


def test_a_config_is_saved_into_directories_that_do_not_exist_yet(tmp_path: Path) -> None:
    target = tmp_path / "runs" / "today" / "run.json"
    TrainingConfig(accum=3).save(target)
    assert TrainingConfig.load(target).accum == 3


def test_from_dict_checks_a_mapping_as_load_checks_a_file() -> None:
    assert RunConfig.from_dict({"lr": 2, "tags": ["a"]}) == RunConfig(lr=2.0, tags=["a"])
    with pytest.raises(ConfigError, match=r"^RunConfig.accum must be an int, got str 'x'$"):
        RunConfig.from_dict({"accum": "x"})


def test_every_unknown_field_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r": RunConfig: unknown field\(s\) momentum, nesterov$"):
        _load(tmp_path, '{"nesterov": true, "momentum": 0.9}')


@config
class Checked:
    lr: float = 1e-3

    def __post_init__(self) -> None:
        if self.lr <= 0:
            raise ValueError(f"lr must be positive, got {self.lr}")


def test_a_config_that_refuses_its_values_is_a_config_error_naming_the_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=rf"^config file {re.escape(str(tmp_path))}/run\.json: Checked: "
                                          r"lr must be positive, got -1\.0$"):
        _load(tmp_path, '{"lr": -1}', Checked)


@config
class Unseen:
    size: int = 1
    later: Undefined = None  # type: ignore[name-defined]  # noqa: F821 (a hint this module cannot see)


def test_fields_whose_hints_cannot_be_resolved_are_taken_as_written(tmp_path: Path) -> None:
    assert _load(tmp_path, '{"size": "big", "later": [1]}', Unseen) == Unseen(size="big", later=[1])


@config
class Shapes:
    anything: Any = None
    thing: object = None
    sizes: tuple[int, ...] = ()
    pair: tuple = ()
    bare_list: list = dataclasses.field(default_factory=list)
    bare_dict: dict = dataclasses.field(default_factory=dict)
    by_number: dict[int, int] = dataclasses.field(default_factory=dict)
    where: Path = Path("out")
    fraction: Fraction = Fraction(1)
    either: int | str = 0
    maybe_either: int | str | None = None
    flag: bool = False
    nothing: None = None


def test_fields_of_every_kind_of_hint_load_with_their_types(tmp_path: Path) -> None:
    loaded = _load(tmp_path, '{"anything": {"a": [1]}, "thing": [2], "sizes": [1, 2, 3], "pair": ["a", 1], '
                             '"bare_list": [1, "b"], "bare_dict": {"k": [1]}, "where": "runs/a", "either": "x", '
                             '"maybe_either": 3, "flag": true, "nothing": null}', Shapes)
    assert loaded == Shapes(anything={"a": [1]}, thing=[2], sizes=(1, 2, 3), pair=("a", 1), bare_list=[1, "b"],
                            bare_dict={"k": [1]}, where=Path("runs/a"), either="x", maybe_either=3, flag=True)
    assert isinstance(loaded.where, Path)


@pytest.mark.parametrize("content, message", [
    ('{"sizes": [1, "x"]}', r"Shapes.sizes\[1\] must be an int, got str 'x'"),
    ('{"sizes": [1, null]}', r"Shapes.sizes\[1\] must be an int, got null"),
    ('{"bare_list": {}}', "Shapes.bare_list must be a list, got an object"),
    ('{"bare_dict": [1]}', "Shapes.bare_dict must be an object, got a list"),
    ('{"by_number": {"1": 2}}', "Shapes.by_number key '1' must be an int, got str '1'"),
    ('{"where": 3}', "Shapes.where must be Path, got int 3"),
    ('{"fraction": "1/2"}', "Shapes.fraction must be Fraction, got str '1/2'"),
    ('{"either": [1]}', "Shapes.either must be an int or a string, got a list"),
    ('{"maybe_either": 1.5}', "Shapes.maybe_either must be an int or a string or null, got float 1.5"),
    ('{"flag": 1}', "Shapes.flag must be true or false, got int 1"),
    ('{"nothing": 0}', "Shapes.nothing must be null, got int 0"),
    ('{"flag": "' + "x" * 100 + '"}', "Shapes.flag must be true or false, got str '" + "x" * 59),  # 60 characters
])
def test_each_kind_of_hint_names_what_it_expected(tmp_path: Path, content: str, message: str) -> None:
    with pytest.raises(ConfigError, match=rf"^config file {re.escape(str(tmp_path))}/run\.json: {message}$"):
        _load(tmp_path, content, Shapes)


@pytest.mark.parametrize("content, message", [
    ('{"lr": null}', "RunConfig.lr must be a number, got null"),
    ('{"accum": true}', "RunConfig.accum must be an int, got bool True"),
    ('{"tags": {}}', "RunConfig.tags must be a list, got an object"),
    ('{"tags": [1]}', r"RunConfig.tags\[0\] must be a string, got int 1"),
    ('{"schedule": [1]}', "RunConfig.schedule must be an object, got a list"),
])
def test_wrong_json_kinds_are_named_in_words(tmp_path: Path, content: str, message: str) -> None:
    with pytest.raises(ConfigError, match=rf"^config file {re.escape(str(tmp_path))}/run\.json: {message}$"):
        _load(tmp_path, content)


def test_a_config_file_may_nest_exactly_max_depth_levels(tmp_path: Path) -> None:
    deepest = '{"anything": ' + "[" * 63 + "]" * 63 + "}"  # the object and 63 lists: 64 levels
    assert _depth_of(_load(tmp_path, deepest, Shapes).anything) == 63
    with pytest.raises(ConfigError, match="nests its JSON deeper than 64 levels"):
        _load(tmp_path, '{"anything": ' + "[" * 64 + "]" * 64 + "}", Shapes)


def _depth_of(value: Any) -> int:
    depth = 0
    while isinstance(value, list):
        value, depth = (value[0] if value else None), depth + 1
    return depth


@pytest.mark.parametrize("text, field, why", [
    ('{"lr": NaN}', "TrainingConfig.lr", "is NaN, which is not JSON: a config holds finite numbers"),
    ('{"lr": -Infinity}', "TrainingConfig.lr", "is -Infinity, which is not JSON"),
    ('{"lr": 1e999}', "TrainingConfig.lr", "is 1e999, beyond the range of a float (it would read as inf)"),
    ('{"betas": [0.9, -1e999]}', "TrainingConfig.betas[1]", "is -1e999, beyond the range of a float"),
    ('{"accum": ' + "7" * 5000 + "}", "TrainingConfig.accum", "is an integer of 5000 digits, more than Python reads"),
    ('{"lr": 0.1, "accum": 2, "lr": 0.2}', "TrainingConfig", "names the key 'lr' twice"),
])
def test_what_json_does_not_hold_is_refused_naming_the_field(tmp_path: Path, text: str, field: str,
                                                             why: str) -> None:
    path = tmp_path / "run.json"
    path.write_text(text)
    with pytest.raises(ConfigError, match=f"^config file {re.escape(str(path))}: {re.escape(field)} {re.escape(why)}"):
        TrainingConfig.load(path)


def test_a_key_named_twice_is_refused_inside_a_nested_object(tmp_path: Path) -> None:
    @config
    class Nested:
        schedule: dict[str, int] = dataclasses.field(default_factory=dict)

    path = tmp_path / "nested.json"
    path.write_text('{"schedule": {"0": 8, "4": 4, "0": 2}}')
    with pytest.raises(ConfigError, match=r"Nested\.schedule names the key '0' twice"):
        Nested.load(path)
    path.write_text('{"schedule": {"0": 8, "4": 4}}')
    assert Nested.load(path).schedule == {"0": 8, "4": 4}
