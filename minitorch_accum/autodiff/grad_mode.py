"""The modes ops run in: whether they record a graph (``no_grad()``, per thread), and whether
NumPy's floating-point warnings are already silenced around them (one ``np.errstate`` per
forward instead of one per op)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar, Token
from typing import Any

import numpy as np

__all__ = ["enable_grad", "float_errors_silenced", "is_grad_enabled", "no_grad", "silence_float_errors"]


class _GradState(threading.local):
    # a class default: reading an attribute a thread never set costs ~1 us through getattr's
    # default (an AttributeError raised and caught), and every op reads it
    enabled = True


_state = _GradState()

# NumPy keeps its error state in a context variable; this flag lives beside it, in the same
# kind of variable, so that it is True exactly where the silencing errstate is in force
_SILENCED: ContextVar[bool] = ContextVar("minitorch_accum_float_errors_silenced", default=False)


def is_grad_enabled() -> bool:
    """True when new ops record what backward needs."""
    return _state.enabled


@contextmanager
def _grad_mode(enabled: bool) -> Iterator[None]:
    previous = is_grad_enabled()
    _state.enabled = enabled
    try:
        yield
    finally:
        _state.enabled = previous


def no_grad() -> contextlib.AbstractContextManager[None]:
    """Run ops without building a graph (evaluation, optimizer updates). Also a decorator."""
    return _grad_mode(False)


def enable_grad() -> contextlib.AbstractContextManager[None]:
    """Turn graph recording back on inside a ``no_grad`` block."""
    return _grad_mode(True)


def float_errors_silenced() -> bool:
    """True inside ``silence_float_errors()``: an op need not enter ``np.errstate`` itself."""
    return _SILENCED.get()


class silence_float_errors:  # noqa: N801 - used as a context manager, named like one
    """NumPy's floating-point warnings off for a whole forward (a Module's call, a replayed
    micro-batch): inf and nan are results here, as on a GPU. Entering ``np.errstate`` costs
    about 2.7 us, as much as a small op; once per forward instead of once per op."""

    __slots__ = ("_errstate", "_token")

    def __init__(self) -> None:
        self._errstate: Any = None
        self._token: Token[bool] | None = None

    def __enter__(self) -> None:
        self._errstate = np.errstate(all="ignore")
        self._errstate.__enter__()
        self._token = _SILENCED.set(True)

    def __exit__(self, *exc: object) -> None:
        assert self._token is not None
        _SILENCED.reset(self._token)
        self._errstate.__exit__(*exc)
