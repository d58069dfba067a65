"""Hypothesis strategies for gradient-accumulation properties, for the library's suite and yours.

    from hypothesis import given
    from minitorch_accum.testing.accumulation_strategies import cases

    @given(cases())
    def test_my_property(case): ...

Needs the ``test`` extra (hypothesis).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise
from typing import Any

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from minitorch_accum.accum import FUSIONS
from minitorch_accum.testing.cases import ACTIVATIONS, TIES, Case, ModelSpec
from minitorch_accum.testing.check_context import Window

__all__ = ["TIES", "UNTIED", "batches", "cases", "model_specs", "spare_steps", "splits", "windows"]

#: ``ties`` default: untied models only, since a model that uses a parameter twice cannot be
#: mirrored layer by layer (into PyTorch, say); pass ``ties=TIES`` to draw tied ones too
UNTIED = ("none",)


@st.composite
def model_specs(draw: Any, kinds: Sequence[str] = ("mlp", "embedding"), max_depth: int = 3,
                layer_norm: bool | None = None, ties: Sequence[str] = UNTIED) -> ModelSpec:
    """MLPs of depth 1-3 (ReLU, GELU or Tanh, optionally LayerNorm'd) or Embedding + Linear heads;
    with ``ties``, models whose first block uses one weight twice (see ``ModelSpec.tie``)."""
    kind = draw(st.sampled_from(list(kinds)))
    classes = draw(st.integers(2, 5))
    seed = draw(st.integers(0, 2**16))
    tie = draw(st.sampled_from(list(ties)))
    if kind == "embedding":
        activation = draw(st.sampled_from(sorted(ACTIVATIONS))) if tie != "none" else "tanh"
        return ModelSpec(kind="embedding", widths=(draw(st.integers(2, 6)), classes), vocab=draw(st.integers(2, 9)),
                         seq_len=draw(st.integers(1, 5)), seed=seed, tie=tie, activation=activation)
    depth = draw(st.integers(1, max_depth))
    widths = (draw(st.integers(1, 6)), *(draw(st.integers(2, 8)) for _ in range(depth - 1)), classes)
    norm = draw(st.booleans()) if layer_norm is None else layer_norm
    return ModelSpec(kind="mlp", widths=widths, activation=draw(st.sampled_from(sorted(ACTIVATIONS))),
                     layer_norm=norm and depth > 1, seed=seed, tie=tie)


def spare_steps(max_spare: int = 3) -> st.SearchStrategy[int]:
    """How many more micro-batches the window could hold than it is given: 0 (a full window)
    about half the time, else 1 to ``max_spare`` (a partial window, closed early)."""
    return st.one_of(st.just(0), st.integers(1, max_spare))


def splits(n: int | None = None, *, min_items: int = 1, max_items: int = 24, max_parts: int = 6,
           even: bool | None = None) -> st.SearchStrategy[tuple[int, ...]]:
    """Micro-batch sizes (each >= 1, sizes of 1 included) summing to ``n`` rows (given), or to a
    drawn number between ``min_items`` and ``max_items``; equal sizes when ``even``, any when None.

        @given(splits(12))          # e.g. (5, 1, 6), (12,), (3, 3, 3, 3)
        def test_my_model(sizes): check_accumulation(make_model, loss_fn, batch, splits=sizes)"""
    if n is not None:
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"splits: n (the rows to split) must be a positive int, got {n!r}")
        min_items = max_items = n
    return _splits(n, min_items, max_items, max_parts, even)


@st.composite
def _splits(draw: Any, n: int | None, min_items: int, max_items: int, max_parts: int,
            even: bool | None) -> tuple[int, ...]:
    if even:
        if n is not None:
            size = draw(st.sampled_from([d for d in range(1, n + 1) if n % d == 0 and n // d <= max_parts]
                                        or [n]))
            return (size,) * (n // size)
        size = draw(st.integers(1, max(1, max_items // 2)))
        parts = draw(st.integers(1, max(1, min(max_parts, max_items // size))))
        return (size,) * parts
    items = draw(st.integers(max(min_items, 1), max_items))
    parts = draw(st.integers(1, min(max_parts, items)))
    cuts: list[int] = []
    if parts > 1:
        cuts = sorted(draw(st.lists(st.integers(1, items - 1), min_size=parts - 1, max_size=parts - 1, unique=True)))
    bounds = [0, *cuts, items]
    return tuple(b - a for a, b in pairwise(bounds))


@st.composite
def windows(draw: Any, n: int | None = None, max_spare: int = 3, **split_options: Any) -> Window:
    """A window: a split of ``n`` rows (see ``splits``) and the Accumulator's k, the number of
    micro-batches (a full window) about half the time, else up to ``max_spare`` more (a partial
    window, closed early)."""
    sizes = draw(splits(n, **split_options))
    return Window(sizes, len(sizes) + draw(spare_steps(max_spare)))


def batches(shapes: Sequence[tuple[int, ...]], dtype: str = "float64", *, classes: int = 3,
            vocab: int | None = None, ignore_index: int | None = None) -> st.SearchStrategy[tuple[Any, ...]]:
    """A batch ``(inputs..., targets)``: one array per shape, rows along axis 0. Every shape but the
    last is an input: floats in [-2, 2] of ``dtype``, or token ids below ``vocab`` when given; the
    last is the targets, class ids below ``classes``, some set to ``ignore_index`` when given
    (padding: those positions are not items).

        @given(batches([(12, 10), (12,)], classes=4))    # x of 12 x 10 features, y of 12 labels"""
    if len(shapes) < 2:
        raise ValueError("batches: give at least one input shape and the targets' shape, e.g. [(12, 10), (12,)]")
    if len({shape[0] for shape in shapes if shape}) > 1:
        raise ValueError(f"batches: every array needs the same rows (axis 0), got shapes {list(shapes)}")
    return _batches(tuple(tuple(s) for s in shapes), dtype, classes, vocab, ignore_index)


@st.composite
def _batches(draw: Any, shapes: tuple[tuple[int, ...], ...], dtype: str, classes: int, vocab: int | None,
             ignore_index: int | None) -> tuple[Any, ...]:
    arrays: list[Any] = []
    for shape in shapes[:-1]:
        if vocab is not None:
            arrays.append(draw(hnp.arrays(np.int64, shape, elements=st.integers(0, vocab - 1))))
        else:
            arrays.append(draw(hnp.arrays(np.dtype(dtype), shape, elements=st.floats(
                -2.0, 2.0, allow_nan=False, allow_infinity=False, width=np.dtype(dtype).itemsize * 8))))
    targets = draw(hnp.arrays(np.int64, shapes[-1], elements=st.integers(0, classes - 1)))
    if ignore_index is not None:
        padded = draw(hnp.arrays(np.bool_, shapes[-1]))
        targets = np.where(padded, ignore_index, targets)
    return (*arrays, targets)


@st.composite
def cases(draw: Any, dtypes: Sequence[str] = ("float64",), reductions: Sequence[str] = ("items", "sum"),
          fusions: Sequence[str] = FUSIONS, compensated: bool | None = None,
          kinds: Sequence[str] = ("mlp", "embedding"), max_items: int = 24, even: bool | None = None,
          layer_norm: bool | None = None, ties: Sequence[str] = UNTIED, partial: bool | None = None) -> Case:
    """A whole comparison: model, split, reduction, fusion, dtype (parameters and activations;
    16-bit gradients go to a float32 arena), whether the arena is compensated, and the
    Accumulator's k: the number of micro-batches (a full window) or up to 3 more (a partial
    window, closed early). ``partial``: True only partial windows, False only full ones,
    None both."""
    fusion = draw(st.sampled_from(list(fusions)))
    comp = draw(st.booleans()) if compensated is None else compensated
    model = draw(model_specs(kinds=kinds, layer_norm=layer_norm, ties=ties))
    sizes = draw(splits(max_items=max_items, even=even))
    spare = 0 if partial is False else draw(st.integers(1, 3) if partial else spare_steps())
    return Case(model=model, sizes=sizes,
                reduction=draw(st.sampled_from(list(reductions))), fusion=fusion,
                dtype=draw(st.sampled_from(list(dtypes))), compensated=comp and fusion != "none",
                data_seed=draw(st.integers(0, 2**16)), steps=len(sizes) + spare if spare else None)
