"""The leaf sink: where backward delivers each parameter's gradient during accumulation.

``fusion="leaf"``: every gradient contribution goes straight into the parameter's
arena view through a fused kernel: ``copy_scale`` for the first write of the window
(no zeroing pass ever runs), ``add_scale`` after it (``cast_add_scale`` for 16-bit
gradients; the Neumaier pair when compensated).

``fusion="gemm"``: additionally, a matmul's weight gradient arrives as the two
factors of a GEMM, which writes into the view itself with beta = 1 (beta = 0 for
the first write), so that gradient never exists as a separate array.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import numpy as np

from minitorch_accum import kernels
from minitorch_accum.accum.trace import kernel_bytes
from minitorch_accum.backend import is_low_precision
from minitorch_accum.nn import Param

if TYPE_CHECKING:
    from minitorch_accum.accum.accumulator import Accumulator

__all__ = ["ArenaSink"]


class ArenaSink:
    """Implements the autodiff engine's LeafSink protocol for one micro-batch."""

    def __init__(self, accumulator: Accumulator, scale: float) -> None:
        self.acc = accumulator
        self.arena = accumulator.arena
        self.scale = scale
        self.fuses_gemm = accumulator.fusion == "gemm" and not accumulator.compensated

    def accepts(self, leaf: Any) -> bool:
        return isinstance(leaf, Param) and leaf in self.arena

    def add(self, leaf: Param, grad: Any) -> None:
        acc = self.acc
        view = self.arena.view(leaf)
        if not grad.flags.c_contiguous:
            grad = leaf._backend.xp.ascontiguousarray(grad)
        first = id(leaf) not in acc._written
        low = is_low_precision(grad.dtype)
        start = time.perf_counter() if acc.trace is not None else 0.0
        if acc.compensated:
            comp = acc.compensation.view(leaf)
            if first:
                kernels.copy_scale_compensated(view, comp, grad, self.scale, flag=acc.flag)
                name = "copy_scale_compensated"
            else:
                kernels.add_scale_compensated(view, comp, grad, self.scale, flag=acc.flag)
                name = "add_scale_compensated"
        elif first:
            kernels.copy_scale(view, grad, self.scale, flag=acc.flag)
            name = "cast_copy_scale" if low else "copy_scale"
        elif low:
            kernels.cast_add_scale(view, grad, self.scale, flag=acc.flag)
            name = "cast_add_scale"
        else:
            kernels.add_scale(view, grad, self.scale, flag=acc.flag)
            name = "add_scale"
        acc._written.add(id(leaf))
        if acc.trace is not None:
            leaf._backend.synchronize()
            acc._record(leaf, name, view.size,
                        kernel_bytes(name, view.size, view.dtype.itemsize, grad.dtype.itemsize),
                        time.perf_counter() - start, True)

    def add_product(self, leaf: Param, a: Any, b: Any) -> None:
        acc = self.acc
        view = self.arena.view(leaf)
        first = id(leaf) not in acc._written
        start = time.perf_counter() if acc.trace is not None else 0.0
        fused = leaf._backend.gemm_into(a, b, view, alpha=self.scale, beta=0.0 if first else 1.0)
        acc._written.add(id(leaf))
        # A GEMM has no fused non-finite flag. Every entry of alpha a @ b, and every partial
        # sum of it, is at most |alpha| ||a||_F ||b||_F (Cauchy-Schwarz), so a running sum of
        # that bound that stays far below the dtype's maximum proves the view finite without
        # reading it; the norms read only the factors (N (in + out) elements, not in x out).
        bound = abs(self.scale) * _frobenius(a) * _frobenius(b)
        acc._gemm_bound[id(leaf)] = acc._gemm_bound.get(id(leaf), 0.0) + bound
        if acc.trace is not None:
            leaf._backend.synchronize()
            name = ("gemm-beta0" if first else "gemm-beta1") if fused else "gemm-fallback"
            factor_bytes = (a.size + b.size) * np.dtype(a.dtype).itemsize
            traffic = 2 * factor_bytes + view.nbytes * (1 if first else 2)  # the GEMM, then the norms
            acc._record(leaf, name, view.size, traffic, time.perf_counter() - start, not fused)


def _frobenius(matrix: Any) -> float:
    """||matrix||_F through the norm kernel; inf or nan when any entry is."""
    if not matrix.flags.c_contiguous:
        matrix = matrix.T if matrix.T.flags.c_contiguous else matrix.copy()
    return kernels.l2_norm(matrix)
