"""The two kinds of case, each a list of variants on the same memory plus what describes it.

- a size sweep: one flat buffer of n elements. With a single buffer, "per tensor",
  "multi-tensor" and "arena" are the same call, so the sweep times the arena call
  (one add_scale over the flat buffer) only;
- a model-shaped list: the parameter shapes of a GPT-2-small-like model (148
  tensors, 124.4M elements) laid out in a real ``GradArena`` (64-byte aligned views
  into one flat buffer), with the gradients in a twin arena of the same layout. Here
  per-tensor calls, one multi-tensor call and one call over the flat buffer are timed
  on the same memory, as are PyTorch's foreach and flat ``add_``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from benchmarks.harness.model_shapes import gpt2_small_shapes
from benchmarks.kernels.arrays import DeviceArrays
from benchmarks.kernels.settings import SCALE
from benchmarks.kernels.variants import (
    STREAM,
    Variant,
    accumulate_variants,
    array_library_variants,
    bfloat16_variants,
    limit_variants,
    torch_variants,
)
from minitorch_accum import kernels as K
from minitorch_accum.accum import GradArena
from minitorch_accum.kernels.dtypes import BFLOAT16
from minitorch_accum.nn import Param

__all__ = ["Case", "flat_case", "model_case", "size_name"]

Case = tuple[list[Variant], dict[str, Any]]  # the variants and the case's description in the result file


def size_name(n: int) -> str:
    """``2^k`` for a power of two, the number otherwise."""
    return f"2^{int(math.log2(n))}" if n & (n - 1) == 0 else str(n)


def flat_case(arrays: DeviceArrays, n: int) -> Case:
    acc, comp = arrays.empty(n, np.float32), arrays.empty(n, np.float32)
    acc[...] = 0
    comp[...] = 0
    g = arrays.random(n, seed=n)
    tmp, dst = arrays.empty(n, np.float32), arrays.empty(n, np.float32)
    dst[...] = 0
    g16 = arrays.to_bfloat16(g)
    variants = array_library_variants(arrays, acc, g, tmp, per_tensor=False)
    variants += accumulate_variants(acc, g, g16, comp, dst)
    if arrays.on_host:
        acc16 = arrays.empty(n, BFLOAT16)
        acc16[...] = 0
        variants += bfloat16_variants(acc16, g, g16)
    variants += torch_variants(arrays, [acc], [g], None if g16 is None else [g16], acc, g)
    variants += limit_variants(arrays, dst, acc, g)
    return variants, {"case": size_name(n), "elements": n, "tensors": 1}


def model_case(arrays: DeviceArrays, divisor: int) -> Case:
    """The model-shaped list in a real GradArena (gradients in a twin arena of the same layout)."""
    shapes = gpt2_small_shapes(divisor)
    # Parameter values are never read: empty arrays cost no memory until touched.
    params = [(name, Param(arrays.xp.empty(shape, dtype=np.float32))) for name, shape in shapes]
    arena = GradArena(params, "float32")
    grads, comps = arena.like(), arena.like()
    acc_flat, g_flat, comp_flat = arena.buffer, grads.buffer, comps.buffer
    g_flat[...] = arrays.random(int(g_flat.size), seed=1)
    accs = [arena.view(p) for _, p in params]
    gs = [grads.view(p) for _, p in params]
    g16_flat = arrays.to_bfloat16(g_flat)
    g16s = None
    if g16_flat is not None:
        base = arrays.address(g_flat)
        g16s = []
        for g in gs:
            offset = (arrays.address(g) - base) // 4
            g16s.append(g16_flat[offset : offset + g.size].reshape(g.shape))
    tmps = [arrays.xp.empty(g.shape, dtype=np.float32) for g in gs]
    dst = arrays.empty(int(acc_flat.size), np.float32)
    dst[...] = 0
    s = SCALE

    def per_tensor() -> None:
        for a, b in zip(accs, gs, strict=True):
            K.add_scale(a, b, s)

    variants = array_library_variants(
        arrays, acc_flat, g_flat, None, per_tensor=True, pairs=list(zip(accs, gs, tmps, strict=True))
    )
    variants += [
        Variant("native_per_tensor", "add_scale on each tensor", 12, per_tensor),
        Variant("native_multi", "multi_add_scale over the list", 12, lambda: K.multi_add_scale(accs, gs, s)),
    ]
    variants += accumulate_variants(acc_flat, g_flat, g16_flat, comp_flat, dst)
    if g16s is not None:
        variants.append(
            Variant(
                "native_multi_cast_add_scale",
                "multi_cast_add_scale bf16 -> fp32 over the list",
                10,
                lambda: K.multi_cast_add_scale(accs, g16s, s),
            )
        )
    if arrays.on_host:  # the same list in a bfloat16 arena, each view at its offset in the rounding stream
        arena16 = GradArena(params, "bfloat16")
        arena16.buffer[...] = 0
        acc16s = [arena16.view(p) for _, p in params]
        offsets = [arena16.span(p)[1] for _, p in params]
        variants.append(Variant("native_multi_add_scale_stochastic", "multi_add_scale_stochastic into a bf16 arena",
                                8, lambda: K.multi_add_scale_stochastic(acc16s, gs, s, *STREAM, offsets)))
    variants += torch_variants(arrays, accs, gs, g16s, acc_flat, g_flat)
    variants += limit_variants(arrays, dst, acc_flat, g_flat)
    elements = sum(math.prod(shape) for _, shape in shapes)
    scale_text = "GPT-2 small shapes" if divisor == 1 else f"GPT-2 small shapes, every dimension / {divisor}"
    return variants, {
        "case": "model",
        "elements": elements,
        "tensors": len(shapes),
        "arena_elements": int(acc_flat.size),
        "model_divisor": divisor,
        "description": scale_text,
    }
