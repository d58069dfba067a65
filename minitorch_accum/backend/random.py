"""The library's random number generator: one seeded NumPy generator for init and dropout.

Random numbers are drawn on the host and moved to the device, so a seed gives the
same model and the same dropout masks on the CPU and on a GPU.
"""

from __future__ import annotations

import numpy as np

__all__ = ["default_generator", "get_rng_state", "manual_seed", "set_rng_state"]

_generator = np.random.default_rng(0)


def manual_seed(seed: int) -> np.random.Generator:
    """Reseed the default generator (parameter init, dropout) and return it."""
    global _generator
    if not isinstance(seed, int | np.integer) or isinstance(seed, bool):
        raise TypeError(f"manual_seed expects an int, got {type(seed).__name__}")
    _generator = np.random.default_rng(int(seed))
    return _generator


def default_generator() -> np.random.Generator:
    """The generator used when a layer or op is not given its own ``rng``."""
    return _generator


def get_rng_state() -> dict:
    """A JSON-serialisable snapshot of the default generator (for checkpoints)."""
    return _generator.bit_generator.state


def set_rng_state(state: dict) -> None:
    """Restore a snapshot taken by :func:`get_rng_state`."""
    _generator.bit_generator.state = state
