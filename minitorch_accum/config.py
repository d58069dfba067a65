"""Burn's Config: a dataclass that saves to and loads from JSON.

    @config
    class TrainingConfig:
        lr: float = 1e-3
        accum: int = 8

    TrainingConfig(lr=3e-4).save("run.json"); TrainingConfig.load("run.json")
"""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
import typing
from pathlib import Path
from typing import Any, TypeVar

from minitorch_accum.durable_files import replace_file_atomically

__all__ = ["ConfigError", "config"]

T = TypeVar("T")


class ConfigError(ValueError):
    """A config file is missing, not JSON, or does not match the config's fields."""


def _to_json(self: Any) -> str:
    return json.dumps(dataclasses.asdict(self), indent=2, sort_keys=True)


def _save(self: Any, path: str | os.PathLike) -> None:
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    # a fresh temporary name (mkstemp) keeps two saves of one path apart; the durable writer
    # fills it, fsyncs it, renames it over the target and fsyncs the directory, so a crash or
    # a full disk leaves the old config or the new one, never half of one
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    os.close(fd)
    replace_file_atomically(target, self.to_json().encode("utf-8"), Path(tmp))


def _from_dict(cls: type[T], values: dict[str, Any]) -> T:
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(values) - set(fields))
    if unknown:
        raise ConfigError(f"{cls.__name__}: unknown field(s) {', '.join(unknown)}")
    hints = typing.get_type_hints(cls)
    converted = {}
    for name, value in values.items():
        hint = hints.get(name)
        if dataclasses.is_dataclass(hint) and isinstance(value, dict):
            value = _from_dict(hint, value)
        elif hint is tuple or typing.get_origin(hint) is tuple:
            value = tuple(value)
        converted[name] = value
    try:
        return cls(**converted)
    except TypeError as exc:
        raise ConfigError(f"{cls.__name__}: {exc}") from None


def _load(cls: type[T], path: str | os.PathLike) -> T:
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist") from None
    try:
        values = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"config file {path} is not valid JSON: {exc}") from None
    if not isinstance(values, dict):
        raise ConfigError(f"config file {path} must hold a JSON object")
    return _from_dict(cls, values)


def config(cls: type[T]) -> type[T]:
    """Make ``cls`` a dataclass with ``save(path)``, ``load(path)``, ``to_json()`` and ``from_dict``."""
    data_cls = dataclasses.dataclass(cls)
    data_cls.to_json = _to_json  # type: ignore[attr-defined]
    data_cls.save = _save  # type: ignore[attr-defined]
    data_cls.load = classmethod(_load)  # type: ignore[attr-defined]
    data_cls.from_dict = classmethod(_from_dict)  # type: ignore[attr-defined]
    return data_cls
