"""How a training setting's values are checked: one kind per shape of value.

A kind checks a value given through the API (``check``: ValueError naming the setting) and
reads one from the command line (``from_text``, the argparse ``type``; the check follows, so a
bad option is named the same way). Every setting of the table in ``train/settings.py`` has
one, so "a positive int" is checked in exactly one place for the builder, the command line
and the benchmarks alike.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

__all__ = ["Choice", "Flag", "Integer", "Kind", "Number", "Optional", "Value", "non_negative_int", "positive_int"]


class Kind:
    """Base: ``accepts`` says whether a value is one of this kind, ``describe`` what the kind is."""

    #: what command-line text is converted with (text that does not convert stays text, and fails the check)
    text_type: ClassVar[Callable[[str], Any] | None] = None

    def check(self, name: str, value: Any) -> Any:
        """The value to store for setting ``name``, or ValueError naming the setting and the value."""
        if not self.accepts(value):
            raise ValueError(f"{name} must be {self.describe()}, got {value!r}")
        return self.normalize(value)

    def accepts(self, value: Any) -> bool:
        return True

    def normalize(self, value: Any) -> Any:
        return value

    def from_text(self, text: str) -> Any:
        convert = type(self).text_type  # a function of the class, not a method of the kind
        if convert is None:
            return text
        try:
            return convert(text)
        except ValueError:
            return text

    def describe(self) -> str:
        return "any value"


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


@dataclass(frozen=True)
class Integer(Kind):
    """A whole number, at least ``minimum`` (bools are not numbers here)."""

    minimum: int | None = None
    text_type: ClassVar[Callable[[str], Any]] = int

    def accepts(self, value: Any) -> bool:
        return _is_number(value) and isinstance(value, int) and (self.minimum is None or value >= self.minimum)

    def describe(self) -> str:
        return {None: "an int", 0: "a non-negative int", 1: "a positive int"}.get(
            self.minimum, f"an int of at least {self.minimum}")


@dataclass(frozen=True)
class Number(Kind):
    """A finite real number; ``positive`` excludes zero and below (NaN is never a setting)."""

    positive: bool = False
    text_type: ClassVar[Callable[[str], Any]] = float

    def accepts(self, value: Any) -> bool:
        return _is_number(value) and math.isfinite(value) and (not self.positive or value > 0)

    def normalize(self, value: Any) -> float:
        return float(value)

    def describe(self) -> str:
        return "a positive finite number" if self.positive else "a finite number"


@dataclass(frozen=True)
class Choice(Kind):
    """One of a fixed tuple of values."""

    values: tuple[Any, ...]

    def accepts(self, value: Any) -> bool:
        # True == 1 in Python: a bool is one of the values only if the values are bools
        return value in self.values and isinstance(value, bool) == any(isinstance(v, bool) for v in self.values)

    def describe(self) -> str:
        return "one of " + ", ".join(map(str, self.values))


class Flag(Kind):
    """On or off (a ``store_true`` option on the command line)."""

    def normalize(self, value: Any) -> bool:
        return bool(value)

    def describe(self) -> str:
        return "true or false"


@dataclass(frozen=True)
class Optional(Kind):
    """None, or a value of ``kind`` (whose check names what is wrong)."""

    kind: Kind

    def check(self, name: str, value: Any) -> Any:
        return None if value is None else self.kind.check(name, value)

    def from_text(self, text: str) -> Any:
        return self.kind.from_text(text)

    def describe(self) -> str:
        return f"None or {self.kind.describe()}"


@dataclass(frozen=True)
class Value(Kind):
    """A value checked by a function of the setting's own (shapes no other setting has)."""

    checker: Callable[[str, Any], Any]
    description: str

    def check(self, name: str, value: Any) -> Any:
        return self.checker(name, value)

    def describe(self) -> str:
        return self.description


def _read_int(kind: Integer, text: str) -> int:
    try:
        value: int = kind.check("the value", kind.from_text(text))
    except ValueError as error:
        # argparse names the option itself ("argument --seed: must be ..."): no second name here
        raise argparse.ArgumentTypeError(str(error).removeprefix("the value ")) from None
    return value


def positive_int(text: str) -> int:
    """An argparse type: a whole number above zero (for programs outside the table, the benchmarks)."""
    return _read_int(Integer(1), text)


def non_negative_int(text: str) -> int:
    """An argparse type: a whole number of zero or more (a seed, for programs outside the table)."""
    return _read_int(Integer(0), text)
