"""How a training setting's values are checked: one kind per shape of value.

A kind checks a value given through the API (``check``: ValueError naming the setting) and
reads one from the command line (``parse``: the argparse ``type``). Every setting of the
table in ``train/settings.py`` has one, so "a positive int" is checked in exactly one place
for the builder, the command line and the benchmarks alike.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["Choice", "Flag", "Integer", "Kind", "Number", "Optional", "Value", "positive_int"]


class Kind:
    """Base: any value passes; text is kept as text."""

    def check(self, name: str, value: Any) -> Any:
        """The value to store for setting ``name``, or ValueError naming the setting and the value."""
        return value

    def parse(self, text: str) -> Any:
        """A value from command-line text (argparse calls this as the option's ``type``)."""
        try:
            return self.check("the value", self.from_text(text))
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error).removeprefix("the value ")) from None

    def from_text(self, text: str) -> Any:
        return text

    def describe(self) -> str:
        return "any value"


@dataclass(frozen=True)
class Integer(Kind):
    """A whole number, at least ``minimum`` (bools are not numbers here)."""

    minimum: int | None = None

    def check(self, name: str, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or (self.minimum is not None and value < self.minimum):
            raise ValueError(f"{name} must be {self.describe()}, got {value!r}")
        return value

    def from_text(self, text: str) -> Any:
        try:
            return int(text)
        except ValueError:
            return text

    def describe(self) -> str:
        return {None: "an int", 0: "a non-negative int", 1: "a positive int"}.get(
            self.minimum, f"an int of at least {self.minimum}")


@dataclass(frozen=True)
class Number(Kind):
    """A finite real number; ``positive`` excludes zero and below (NaN is never a setting)."""

    positive: bool = False

    def check(self, name: str, value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) \
                or (self.positive and value <= 0):
            raise ValueError(f"{name} must be {self.describe()}, got {value!r}")
        return float(value)

    def from_text(self, text: str) -> Any:
        try:
            return float(text)
        except ValueError:
            return text

    def describe(self) -> str:
        return "a positive finite number" if self.positive else "a finite number"


@dataclass(frozen=True)
class Choice(Kind):
    """One of a fixed tuple of values."""

    values: tuple[Any, ...]

    def check(self, name: str, value: Any) -> Any:
        if value not in self.values or isinstance(value, bool) != any(isinstance(v, bool) for v in self.values):
            raise ValueError(f"{name} must be {self.describe()}, got {value!r}")
        return value

    def describe(self) -> str:
        return "one of " + ", ".join(map(str, self.values))


class Flag(Kind):
    """On or off (a ``store_true`` option on the command line)."""

    def check(self, name: str, value: Any) -> bool:
        return bool(value)

    def describe(self) -> str:
        return "true or false"


@dataclass(frozen=True)
class Optional(Kind):
    """None, or a value of ``kind``."""

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


_POSITIVE = Integer(1)


def positive_int(text: str) -> int:
    """An argparse type: a whole number above zero (for programs outside the table, the benchmarks)."""
    return _POSITIVE.parse(text)
