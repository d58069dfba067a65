"""How the error of an accumulated window gradient grows with k, for each way of accumulating.

The same k micro-batch gradients (computed in float64) are summed six ways, as the arena
would sum them:

- ``bf16 -> bf16``: bfloat16 gradients into a bfloat16 buffer, each float32 sum rounded to nearest
  (``add_scale`` into a bfloat16 arena);
- ``bf16 -> bf16 (stochastic rounding)``: the same, each sum rounded up with probability equal to
  the fraction of a unit it discards (``cast_add_scale_stochastic``): exact in expectation;
- ``bf16 -> float32``: bfloat16 gradients into a float32 buffer (``cast_add_scale``);
- ``float32``: float32 gradients into a float32 buffer (``add_scale``);
- ``float32 compensated``: the same with Neumaier's compensation (``add_scale_compensated``,
  the compensation folded in at the end, as the arena folds it);
- ``float64``: float64 gradients into a float64 buffer.

Each sum is compared with the exact sum of the very values it added (a compensated float64
sum, whose own error is of order eps64^2 k), so what is measured is the accumulation alone:
``||acc - exact|| / ||exact||``. The rounding of the gradients to bfloat16 before any sum is
reported apart (``bf16 gradients themselves``). Theory (Higham, chapter 4): a recursive sum
errs by at most about k * eps in the worst case and grows like sqrt(k) * eps when the rounding
errors are random; the compensated sum errs by about eps, whatever k is. Rounded to nearest, a
bfloat16 sum errs the worst way: once the running sum is 2^8 times an addend, the addend is lost
whole, every time, so the error grows like k units. Stochastic rounding makes each rounding error
zero on average and independent of the others, so they add like a random walk: about sqrt(k)
units. The study draws that expectation as the row's guide (``expected``): the square root of the
sum, over every rounding it made, of its variance (x - lo)(hi - x), x the float32 sum and lo, hi
its two bfloat16 neighbours, relative to the exact sum.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import ml_dtypes
import numpy as np

from minitorch_accum import kernels
from minitorch_accum.autodiff import tensor
from minitorch_accum.nn import Module
from minitorch_accum.nn import functional as F

__all__ = ["INPUT_ROUNDING", "ROWS", "STOCHASTIC", "PrecisionRow", "PrecisionStudy", "accumulation_errors",
           "default_ks", "micro_batch_gradients"]

BF16 = np.dtype(ml_dtypes.bfloat16)
#: (name, dtype of the gradients, dtype of the buffer), in the order of the table
ROWS: tuple[tuple[str, str, str], ...] = (
    ("bf16 -> bf16", "bfloat16", "bfloat16"),
    ("bf16 -> bf16 (stochastic rounding)", "bfloat16", "bfloat16"),
    ("bf16 -> float32 (cast_add_scale)", "bfloat16", "float32"),
    ("float32", "float32", "float32"),
    ("float32 compensated (Neumaier)", "float32", "float32"),
    ("float64", "float64", "float64"),
)
#: the row of the bfloat16 rounding of the gradients themselves, before any sum
INPUT_ROUNDING = "bf16 gradients themselves"
#: the row rounded stochastically (its seed: the study's, window 0, micro-batch j for the j-th sum)
STOCHASTIC = "bf16 -> bf16 (stochastic rounding)"
_DTYPES = {"bfloat16": BF16, "float32": np.dtype(np.float32), "float64": np.dtype(np.float64)}


def default_ks(largest: int = 1024) -> list[int]:
    """1, 2, 4, ... up to ``largest``."""
    return [2**i for i in range(int(np.log2(largest)) + 1)]


@dataclass
class PrecisionRow:
    """One way of accumulating: its relative error after k micro-batches, for each k."""

    name: str
    gradient_dtype: str
    buffer_dtype: str
    errors: dict[int, float] = field(default_factory=dict)
    #: the expected error, for the stochastically rounded row: sqrt(sum of its roundings' variances)
    expected: dict[int, float] = field(default_factory=dict)

    @property
    def eps(self) -> float:
        """The machine epsilon of the buffer (the guide lines are sqrt(k) * eps and k * eps)."""
        return float(np.finfo(_DTYPES[self.buffer_dtype]).eps)

    def as_dict(self) -> dict[str, Any]:
        record = {"name": self.name, "gradients": self.gradient_dtype, "buffer": self.buffer_dtype, "eps": self.eps,
                  "errors": {str(k): e for k, e in self.errors.items()}}
        if self.expected:
            record["expected"] = {str(k): e for k, e in self.expected.items()}
        return record


@dataclass
class PrecisionStudy:
    """The rows of one study, with what it was run on."""

    ks: list[int]
    rows: list[PrecisionRow]
    about: dict[str, Any] = field(default_factory=dict)

    def row(self, name: str) -> PrecisionRow:
        for row in self.rows:
            if row.name == name:
                return row
        raise KeyError(f"no row {name!r}; the study has {', '.join(r.name for r in self.rows)}")

    def as_dict(self) -> dict[str, Any]:
        return {"ks": self.ks, "rows": [r.as_dict() for r in self.rows], **self.about}

    def table(self) -> str:
        """Relative errors, one row per way of accumulating, one column per k."""
        width = max(len(r.name) for r in self.rows)
        lines = [f"{'relative error':<{width}}  " + "  ".join(f"{'k=' + str(k):>8}" for k in self.ks)]
        for r in self.rows:
            lines.append(f"{r.name:<{width}}  " + "  ".join(f"{r.errors[k]:>8.1e}" for k in self.ks))
        return "\n".join(lines)


class _CompensatedSum:
    """Neumaier's running sum in float64 NumPy: the exact reference (sum + compensation)."""

    def __init__(self, size: int) -> None:
        self.sum = np.zeros(size)
        self.compensation = np.zeros(size)

    def add(self, values: np.ndarray) -> None:
        total = self.sum + values
        self.compensation += np.where(np.abs(self.sum) >= np.abs(values), (self.sum - total) + values,
                                      (values - total) + self.sum)
        self.sum = total

    def relative_norm(self, norm: float) -> float:
        """``norm`` relative to the exact sum's."""
        exact_norm = float(np.linalg.norm(self.sum + self.compensation))
        return norm / exact_norm if exact_norm > 0 else norm

    def relative_error(self, value: np.ndarray) -> float:
        exact_norm = float(np.linalg.norm(self.sum + self.compensation))
        # (value - sum) is exact when they are close (Sterbenz); the compensation is taken off after
        error = float(np.linalg.norm((value.astype(np.float64) - self.sum) - self.compensation))
        return error / exact_norm if exact_norm > 0 else error


class _Buffer:
    """One row's accumulation buffer, written as the arena writes it."""

    def __init__(self, name: str, gradient_dtype: str, buffer_dtype: str, size: int, seed: int) -> None:
        self.gradients = _DTYPES[gradient_dtype]
        self.buffer = np.zeros(size, _DTYPES[buffer_dtype])
        self.compensation = np.zeros(size, self.buffer.dtype) if "compensated" in name else None
        self.stochastic = name == STOCHASTIC
        self.seed = seed
        self.count = 0  # sums written so far: the micro-batch of the next one
        self.variance = 0.0  # of the stochastic roundings so far, summed over elements (float64)

    def add(self, grads: dict[np.dtype, np.ndarray]) -> None:
        g = grads[self.gradients]
        first = self.count == 0
        if self.stochastic:
            self.variance += _rounding_variance(g if first else self.buffer.astype(np.float32) + g.astype(np.float32))
            write = kernels.copy_scale_stochastic if first else kernels.cast_add_scale_stochastic
            write(self.buffer, g, 1.0, self.seed, 0, self.count)
        elif self.compensation is not None:
            write = kernels.copy_scale_compensated if first else kernels.add_scale_compensated
            write(self.buffer, self.compensation, g, 1.0)
        else:  # a bfloat16 buffer: each float32 sum rounded to nearest
            (kernels.copy_scale if first else kernels.add_scale)(self.buffer, g, 1.0)
        self.count += 1

    def value(self) -> np.ndarray:
        if self.compensation is None:
            return self.buffer
        folded = self.buffer.copy()
        kernels.add_scale(folded, self.compensation, 1.0)  # the arena's fold at the window's close
        return folded


def _rounding_variance(x: np.ndarray) -> float:
    """The summed variance of rounding each float32 of ``x`` stochastically to bfloat16: (x - lo)(hi - x)
    with lo and hi its two neighbours (0 where bfloat16 holds x exactly)."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    low = (bits & np.uint32(0xFFFF0000)).view(np.float32).astype(np.float64)
    with np.errstate(over="ignore"):  # the neighbour of the largest values is inf: no such sum here
        high = ((bits & np.uint32(0xFFFF0000)) + np.uint32(0x10000)).view(np.float32).astype(np.float64)
    value = x.astype(np.float64)
    return float(np.sum(np.abs(value - low) * np.abs(high - value)))


def accumulation_errors(gradients: Iterable[np.ndarray], ks: Sequence[int], seed: int = 0) -> PrecisionStudy:
    """Sum the first max(ks) ``gradients`` (flat float64 arrays, one per micro-batch) each way
    of ``ROWS`` and measure, after k of them for each k in ``ks``, the relative error (``seed``:
    the stochastic rounding's)."""
    ks = sorted({int(k) for k in ks})
    if not ks or ks[0] < 1:
        raise ValueError(f"precision: every k must be a positive int, got {list(ks)!r}")
    rows = [PrecisionRow(name, g, b) for name, g, b in ROWS]
    rounding = PrecisionRow(INPUT_ROUNDING, "bfloat16", "float64")
    buffers: list[_Buffer] = []
    exact: dict[np.dtype, _CompensatedSum] = {}
    source = iter(gradients)
    for count in range(1, ks[-1] + 1):
        try:
            g = np.ascontiguousarray(next(source), dtype=np.float64).reshape(-1)
        except StopIteration:
            raise ValueError(f"precision: k={ks[-1]} needs {ks[-1]} micro-batch gradients, got {count - 1}") from None
        grads = {dtype: g.astype(dtype) for dtype in _DTYPES.values()}
        if not buffers:
            buffers = [_Buffer(name, gd, bd, g.size, seed) for name, gd, bd in ROWS]
            exact = {dtype: _CompensatedSum(g.size) for dtype in _DTYPES.values()}
        for buffer in buffers:
            buffer.add(grads)
        for dtype, reference in exact.items():
            reference.add(grads[dtype].astype(np.float64))
        if count in ks:
            for row, buffer in zip(rows, buffers, strict=True):
                reference = exact[buffer.gradients]
                row.errors[count] = reference.relative_error(buffer.value())
                if buffer.stochastic:
                    row.expected[count] = reference.relative_norm(np.sqrt(buffer.variance))
            truth = exact[_DTYPES["float64"]]
            rounding.errors[count] = truth.relative_error(exact[BF16].sum + exact[BF16].compensation)
    return PrecisionStudy(list(ks), [*rows, rounding])


def micro_batch_gradients(model: Module, batches: Iterable[Any]) -> Iterator[np.ndarray]:
    """The float64 gradient of each micro-batch's summed loss at the model's parameters as they
    are (a window does not move them), all parameters in one flat array: the study's input."""
    params = list(model.parameters())
    for x, y in batches:
        loss = F.cross_entropy(model(tensor(x, dtype="float64") if x.dtype.kind == "f" else x), y, reduction="sum")
        grads = loss.backward()
        yield np.concatenate([np.asarray(grads[p], dtype=np.float64).reshape(-1) if p in grads
                              else np.zeros(p.size) for p in params])
