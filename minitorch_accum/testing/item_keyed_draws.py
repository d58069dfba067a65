"""Random draws keyed to the batch's items: dropout gives an item the same mask wherever it falls.

A window and the big batch see an item in different micro-batches; a dropout mask drawn per
forward pass then differs between them, and the two gradients cannot be compared. During a
check, every forward runs under ``keyed_draws(seed, rows)``: a draw of ``random(shape)`` from the
default generator (``F.dropout``, ``nn.Dropout``, attention dropout, ``mta.rand``) is cut along
its first axis into one block per row of the micro-batch, and row r's block is drawn from a
generator seeded by (seed, r, the draw's place in the forward). The same item gets the same
mask in a micro-batch of one row, of five, or in the whole batch, so dropout stays on and the
window still equals the big batch. A draw whose first axis is not a multiple of the rows cannot
follow the items (``UnkeyableDrawError``); the check then runs the model in evaluation mode and says
so. Any other method of the generator (``normal``, ``integers``...) draws from the default
generator unkeyed, and the check's determinism probe names it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from minitorch_accum.backend import default_generator
from minitorch_accum.backend.random import drawing_from

__all__ = ["ItemKeyedGenerator", "UnkeyableDrawError", "keyed_draws"]


class UnkeyableDrawError(RuntimeError):
    """A random draw in the forward whose first axis is not the micro-batch's rows."""

    def __init__(self, shape: tuple[int, ...], rows: int) -> None:
        self.shape = shape
        self.rows = rows
        super().__init__(f"a random draw of shape {shape} in the forward: its first axis is not a multiple of the "
                         f"micro-batch's {rows} rows, so its values cannot follow the items")


class ItemKeyedGenerator:
    """The default generator for one forward over ``rows`` (the batch's row indices): ``random``
    keyed per row as the module docstring says; every other method the default generator's."""

    def __init__(self, base: Any, seed: int, rows: Sequence[int]) -> None:
        self._base = base
        self._seed = int(seed)
        self._rows = [int(r) for r in rows]
        self._draws = 0  # the draw's place in this forward: the same layer gets the same number

    def random(self, size: Any = None, dtype: Any = np.float64, out: Any = None) -> Any:
        if size is None or out is not None:
            return self._base.random(size, dtype=dtype, out=out)
        shape = (int(size),) if np.ndim(size) == 0 else tuple(int(n) for n in size)
        rows = len(self._rows)
        if not shape or shape[0] % rows:
            raise UnkeyableDrawError(shape, rows)
        place = self._draws
        self._draws += 1
        per_row = (shape[0] // rows, *shape[1:])
        blocks = [np.random.default_rng((self._seed, row, place)).random(per_row, dtype=dtype) for row in self._rows]
        return np.concatenate(blocks, axis=0)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._base, name)


@contextmanager
def keyed_draws(seed: int, rows: Sequence[int]) -> Iterator[ItemKeyedGenerator]:
    """Run a forward over the batch's ``rows`` with item-keyed draws (this thread only)."""
    generator = ItemKeyedGenerator(default_generator(), seed, rows)
    with drawing_from(generator):
        yield generator
