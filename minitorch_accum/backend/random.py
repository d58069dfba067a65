"""The library's random number generator: one seeded NumPy generator for init and dropout.

Random numbers are drawn on the host and moved to the device, so a seed gives the
same model and the same dropout masks on the CPU and on a GPU.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

__all__ = ["default_generator", "drawing_from", "fork_rng", "get_rng_state", "manual_seed", "set_rng_state"]

_generator = np.random.default_rng(0)
#: a generator standing in for the default one in this thread only (``drawing_from``)
_this_thread = threading.local()


def manual_seed(seed: int) -> np.random.Generator:
    """Reseed the default generator (parameter init, dropout) and return it."""
    global _generator
    if not isinstance(seed, int | np.integer) or isinstance(seed, bool):
        raise TypeError(f"manual_seed expects an int, got {type(seed).__name__}")
    _generator = np.random.default_rng(int(seed))
    return _generator


def default_generator() -> np.random.Generator:
    """The generator used when a layer or op is not given its own ``rng`` (in this thread: the one
    ``drawing_from`` installed, if any)."""
    standing_in = getattr(_this_thread, "generator", None)
    return _generator if standing_in is None else standing_in


@contextmanager
def drawing_from(generator: Any) -> Iterator[None]:
    """Every draw of this thread that would use the default generator uses ``generator`` (any object
    with the Generator methods the code calls) until the block ends. Other threads are unaffected:
    the equivalence checks give each data-parallel rank, a thread, its own item-keyed masks."""
    previous = getattr(_this_thread, "generator", None)
    _this_thread.generator = generator
    try:
        yield
    finally:
        _this_thread.generator = previous


@contextmanager
def fork_rng(seed: int) -> Iterator[np.random.Generator]:
    """Seed the default generator for the block and give the caller's generator back after it, its
    stream untouched (PyTorch's ``torch.random.fork_rng``): code that builds models with a seed of
    its own leaves the user's random stream where it was."""
    global _generator
    saved = _generator
    manual_seed(seed)
    try:
        yield _generator
    finally:
        _generator = saved


def get_rng_state() -> dict:
    """A JSON-serialisable snapshot of the default generator (for checkpoints)."""
    return _generator.bit_generator.state


def set_rng_state(state: dict) -> None:
    """Restore a snapshot taken by :func:`get_rng_state`."""
    _generator.bit_generator.state = state
