"""Drawing indices from the distributions a tensor holds: ``multinomial``, as PyTorch's.

Draws come from the library's seeded generator (``mta.manual_seed``) or one passed as
``generator``, on the host in float64 like every random draw here, so a seed gives the same
samples on every device and dtype; the indices are then moved to the input's device.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from minitorch_accum.autodiff.tensor import Tensor
from minitorch_accum.backend import backend_for, default_generator, int64, is_float_dtype

__all__ = ["multinomial"]


def _weights(values: Any) -> tuple[Tensor | None, np.ndarray]:
    """(the tensor, if one was given; its weights as a float64 host array)."""
    if isinstance(values, Tensor):
        if not is_float_dtype(values.dtype):
            raise TypeError(f"multinomial: needs float weights, got a tensor of {values.dtype.name}")
        return values, np.asarray(values.backend.to_host(values.data), dtype=np.float64)
    host = np.asarray(values)
    if host.dtype.kind != "f":
        raise TypeError(f"multinomial: needs float weights, got {host.dtype.name}")
    return None, host.astype(np.float64)


def multinomial(input: Any, num_samples: int, replacement: bool = False, *,
                generator: np.random.Generator | None = None) -> Tensor:
    """``num_samples`` indices drawn from each row of ``input`` (1-D: one distribution, 2-D: one
    per row), index i with probability ``input[..., i] / input.sum(-1)``: the weights need not add
    up to 1 but must be finite and non-negative, with a positive sum. Without ``replacement``
    an index is drawn at most once per row, so a row needs ``num_samples`` non-zero weights.
    Returns int64 indices of shape (num_samples,) or (rows, num_samples), on the input's device.

    ``generator`` is a NumPy generator (what ``mta.manual_seed`` returns, and what ``rng=`` takes
    elsewhere); the library's default generator when None."""
    source, weights = _weights(input)
    if weights.ndim not in (1, 2):
        raise ValueError(f"multinomial: weights must have 1 or 2 axes, got shape {weights.shape}")
    if isinstance(num_samples, bool) or not isinstance(num_samples, int | np.integer) or num_samples <= 0:
        raise ValueError(f"multinomial: num_samples must be a positive int, got {num_samples!r}")
    rows = weights.reshape(-1, weights.shape[-1])
    count = rows.shape[-1]
    if not replacement and num_samples > count:
        raise ValueError(f"multinomial: cannot draw {num_samples} samples without replacement from {count} "
                         "categories; pass replacement=True")
    if not np.isfinite(rows).all() or (rows < 0).any():
        raise ValueError("multinomial: weights must be finite and non-negative (no inf, nan or negative value)")
    totals = rows.sum(axis=-1)
    for i, total in enumerate(totals):
        if not total > 0:
            raise ValueError(f"multinomial: the weights of row {i} add up to 0: nothing to draw from")
        if not replacement and np.count_nonzero(rows[i]) < num_samples:
            raise ValueError(f"multinomial: row {i} has {np.count_nonzero(rows[i])} non-zero weight(s), too few "
                             f"for {num_samples} samples without replacement")
    rng = generator if generator is not None else default_generator()
    drawn = np.stack([rng.choice(count, size=int(num_samples), replace=bool(replacement), p=row / total)
                      for row, total in zip(rows, totals, strict=True)])
    drawn = drawn.reshape(weights.shape[:-1] + (int(num_samples),)).astype(int64)
    backend = source.backend if source is not None else backend_for("cpu")
    return Tensor(backend.asarray(drawn), _backend=backend)
