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
import math
import os
import sys
import tempfile
import types
import typing
from pathlib import Path
from typing import Any, TypeVar

from minitorch_accum.durable_files import replace_file_atomically

__all__ = ["ConfigError", "config"]

T = TypeVar("T")


class ConfigError(ValueError):
    """A config file is missing, unreadable, not UTF-8 JSON, holds what JSON does not (NaN, Infinity,
    a number beyond a float, an int too long to read, a key named twice), or does not match the
    config's fields (names and types); the message names the file and the field."""


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


#: how deeply a config file may nest its JSON (a config is a few levels deep; Python's own parser
#: stops with a RecursionError somewhere near 1000)
MAX_DEPTH = 64


def _from_dict(cls: type[T], values: dict[str, Any], where: str | None = None) -> T:
    """An instance of ``cls`` from ``values``, each field checked against its type hint (nested
    configs, tuples, lists, dicts, Optional and unions, Literal); ConfigError naming the field
    (and ``where``: the file) otherwise."""
    return _build(cls, values, (f"config file {where}: " if where else "") + cls.__name__)


def _build(cls: type[T], values: Any, where: str) -> T:
    if not isinstance(values, dict):
        raise ConfigError(f"{where} must be a JSON object, got {_kind(values)}")
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(values) - set(fields))
    if unknown:
        raise ConfigError(f"{where}: unknown field(s) {', '.join(unknown)}")
    try:
        hints = typing.get_type_hints(cls)
    except (NameError, TypeError):  # hints naming what this module cannot see: taken as written
        hints = {}
    converted = {name: _convert(value, hints.get(name, Any), f"{where}.{name}") for name, value in values.items()}
    try:
        return cls(**converted)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{where}: {exc}") from None


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, dict | list):
        return "an object" if isinstance(value, dict) else "a list"
    return f"{type(value).__name__} {repr(value)[:60]}"


def _convert(value: Any, hint: Any, where: str) -> Any:
    """``value`` (parsed JSON) as the type ``hint`` says, or ConfigError naming ``where``."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any or hint is object:
        return value
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        return _build(hint, value, where)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        failures = []
        for arm in (a for a in args if a is not type(None)):
            try:
                return _convert(value, arm, where)
            except ConfigError as exc:
                failures.append(str(exc))
        raise ConfigError(failures[0] if len(failures) == 1 else
                          f"{where} must be {' or '.join(_name(a) for a in args)}, got {_kind(value)}")
    if origin is typing.Literal:
        if value in args and type(value) in {type(a) for a in args}:
            return value
        raise ConfigError(f"{where} must be one of {', '.join(map(repr, args))}, got {_kind(value)}")
    if hint is tuple or origin is tuple:
        if not isinstance(value, list | tuple):
            raise ConfigError(f"{where} must be a list (a tuple), got {_kind(value)}")
        if not args or (len(args) == 2 and args[1] is Ellipsis):
            item = args[0] if args else Any
            return tuple(_convert(v, item, f"{where}[{i}]") for i, v in enumerate(value))
        if len(value) != len(args):
            raise ConfigError(f"{where} must hold {len(args)} values, got {len(value)}")
        return tuple(_convert(v, a, f"{where}[{i}]") for i, (v, a) in enumerate(zip(value, args, strict=True)))
    if hint is list or origin is list:
        if not isinstance(value, list):
            raise ConfigError(f"{where} must be a list, got {_kind(value)}")
        return [_convert(v, args[0] if args else Any, f"{where}[{i}]") for i, v in enumerate(value)]
    if hint is dict or origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{where} must be an object, got {_kind(value)}")
        key_hint, item = args if args else (Any, Any)
        return {_convert(k, key_hint, f"{where} key {k!r}"): _convert(v, item, f"{where}[{k!r}]")
                for k, v in value.items()}
    return _scalar(value, hint, where)


def _scalar(value: Any, hint: Any, where: str) -> Any:
    if hint is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
    elif hint is int or hint is bool:
        if type(value) is hint:
            return value
    elif hint is type(None):
        if value is None:
            return None
    elif isinstance(hint, type):
        if isinstance(value, hint):
            return value
        if issubclass(hint, os.PathLike) and isinstance(value, str):  # a path is saved as its text
            return hint(value)
    else:
        return value  # a hint this reader does not know (a TypeVar, a Protocol): taken as it is
    raise ConfigError(f"{where} must be {_name(hint)}, got {_kind(value)}")


def _name(hint: Any) -> str:
    names = {float: "a number", int: "an int", bool: "true or false", str: "a string", type(None): "null"}
    return names.get(hint, getattr(hint, "__name__", str(hint)))


def _depth(value: Any) -> int:
    """How deeply ``value`` nests lists and objects (counted without recursion)."""
    deepest, pending = 0, [(value, 1)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, depth)
            pending.extend((v, depth + 1) for v in (item.values() if isinstance(item, dict) else item))
    return deepest


def _load(cls: type[T], path: str | os.PathLike) -> T:
    where = f"config file {path}"
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"{where} does not exist") from None
    except OSError as exc:
        raise ConfigError(f"{where} cannot be read: {exc.strerror or exc}") from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{where} is not UTF-8 text (byte {exc.start}: {data[exc.start:exc.start + 1]!r})") from None
    try:
        values = json.loads(text, parse_constant=_Refused.constant, parse_float=_read_float, parse_int=_read_int,
                            object_pairs_hook=_object)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{where} is not valid JSON: {exc}") from None
    except RecursionError:
        raise ConfigError(f"{where} nests its JSON deeper than {MAX_DEPTH} levels") from None
    refused = _first_refused(values, cls.__name__)
    if refused is not None:
        raise ConfigError(f"{where}: {refused}")
    if not isinstance(values, dict):
        raise ConfigError(f"{where} must hold a JSON object, got {_kind(values)}")
    if _depth(values) > MAX_DEPTH:
        raise ConfigError(f"{where} nests its JSON deeper than {MAX_DEPTH} levels")
    return _from_dict(cls, values, str(path))


class _Refused:
    """A value Python's JSON reader would take but a config must not: NaN and Infinity (not JSON; a
    learning rate of NaN trains nothing), a number beyond a float (1e999 reads as infinity), an int
    longer than Python reads from text. Kept in place while parsing, so the message can name its field."""

    def __init__(self, why: str) -> None:
        self.why = why

    @staticmethod
    def constant(name: str) -> _Refused:
        return _Refused(f"is {name}, which is not JSON: a config holds finite numbers")


def _read_float(text: str) -> float | _Refused:
    value = float(text)
    if math.isinf(value):
        return _Refused(f"is {text}, beyond the range of a float (it would read as {value})")
    return value


def _read_int(text: str) -> int | _Refused:
    try:
        return int(text)
    except ValueError:  # more digits than sys.get_int_max_str_digits() allows
        return _Refused(f"is an integer of {len(text.lstrip('-'))} digits, more than Python reads from text "
                        f"({sys.get_int_max_str_digits()} digits, sys.set_int_max_str_digits)")


class _Repeated(dict):  # type: ignore[type-arg]
    """A JSON object that names a key twice (readers disagree on which value counts: refused)."""

    repeated: str


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    values = dict(pairs)
    if len(values) == len(pairs):
        return values
    marked, seen = _Repeated(values), set()
    for key, _ in pairs:
        if key in seen:
            marked.repeated = key
            break
        seen.add(key)
    return marked


def _first_refused(values: Any, root: str) -> str | None:
    """``FIELD why`` for the first refused value or repeated key in ``values`` (walked without
    recursion, in the file's order), None when there is none."""
    pending = [(values, root)]
    while pending:
        item, where = pending.pop()
        if isinstance(item, _Refused):
            return f"{where} {item.why}"
        if isinstance(item, _Repeated):
            return f"{where} names the key {item.repeated!r} twice (which value counts is not defined)"
        if isinstance(item, dict):
            pending.extend(reversed([(v, f"{where}.{k}") for k, v in item.items()]))
        elif isinstance(item, list):
            pending.extend(reversed([(v, f"{where}[{i}]") for i, v in enumerate(item)]))
    return None


def config(cls: type[T]) -> type[T]:
    """Make ``cls`` a dataclass with ``save(path)``, ``load(path)``, ``to_json()`` and ``from_dict``."""
    data_cls = dataclasses.dataclass(cls)
    data_cls.to_json = _to_json  # type: ignore[attr-defined]
    data_cls.save = _save  # type: ignore[attr-defined]
    data_cls.load = classmethod(_load)  # type: ignore[attr-defined]
    data_cls.from_dict = classmethod(_from_dict)  # type: ignore[attr-defined]
    return data_cls
