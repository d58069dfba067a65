"""Whether ops record a graph: ``no_grad()`` turns recording off (per thread)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["enable_grad", "is_grad_enabled", "no_grad"]

_state = threading.local()


def is_grad_enabled() -> bool:
    """True when new ops record what backward needs."""
    return getattr(_state, "enabled", True)


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
