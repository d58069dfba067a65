"""The Backend interface: what the ops and the accumulation layer may ask of a device.

Ops are written once against ``backend.xp`` (NumPy's array API, which CuPy mirrors)
plus the few operations below whose spelling differs between the two libraries, and
the fused layer kernels (``minitorch_accum.kernels.fused``: GELU, LayerNorm, softmax
cross entropy, embedding backward, softmax rows), which run natively on NumPy arrays and as CUDA
kernels on CuPy arrays, for float32 and float64 (``fuses``).
"""

from __future__ import annotations

import contextlib
import math
from abc import ABC, abstractmethod
from typing import Any

import numpy as np

from minitorch_accum import kernels
from minitorch_accum.backend.device import Device

__all__ = ["FUSED_DTYPES", "Backend"]

#: the dtypes the fused layer kernels take; ops keep their array-library form for the others
FUSED_DTYPES: tuple[np.dtype, ...] = (np.dtype(np.float32), np.dtype(np.float64))


class Backend(ABC):
    """A device and the array library that computes on it."""

    device: Device
    xp: Any  # numpy or cupy
    #: whether ``device_scope()`` does anything (CuPy: make the device current); when it does
    #: not, an op inside a forward whose errstate is already entered calls no context at all.
    #: A subclass that overrides ``device_scope`` has one unless it says otherwise.
    has_device_scope: bool = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "has_device_scope" not in cls.__dict__ and "device_scope" in cls.__dict__:
            cls.has_device_scope = True

    @property
    def name(self) -> str:
        return type(self).__name__

    @abstractmethod
    def asarray(self, data: Any, dtype: np.dtype | None = None, copy: bool = False) -> Any:
        """Data (nested lists, NumPy or device arrays) as an array on this device.

        With ``copy=False`` an array already on this device with this dtype is returned
        as it is (shared); ``copy=True`` always gives a fresh array."""

    @abstractmethod
    def to_host(self, array: Any) -> np.ndarray:
        """A NumPy copy (or view, on the CPU) of an array of this device."""

    @abstractmethod
    def is_array(self, value: Any) -> bool:
        """True when ``value`` is an array of this backend's array type."""

    @abstractmethod
    def erf(self, x: Any) -> Any:
        """The error function elementwise (NumPy has none; SciPy and CuPy do)."""

    @abstractmethod
    def scatter_add(self, target: Any, indices: Any, values: Any) -> None:
        """``target[indices] += values`` where repeated indices add up (unbuffered)."""

    @abstractmethod
    def gemm_into(self, a: Any, b: Any, out: Any, alpha: float, beta: float, background: bool = False) -> bool:
        """``out = alpha * a @ b + beta * out`` for 2-D arrays, written into ``out`` in place.

        Returns True when a BLAS GEMM wrote into ``out`` directly (no temporary the
        size of ``out``), False when it had to fall back to a product and an update.
        ``background``: it may run on another thread while the caller goes on (the CPU's
        native pool); then ``settle()`` must come before ``out`` is read or ``a``, ``b`` or
        ``out`` written.
        """

    def settle(self) -> None:  # noqa: B027 - nothing runs in the background by default
        """Wait for the GEMM ``gemm_into(..., background=True)`` left running."""

    def matmul(self, a: Any, b: Any) -> Any:
        """``a @ b`` for 2-D a and b: the ops' products that are one GEMM (the CPU runs them on the
        native pool, see backend/blas.py)."""
        return self.xp.matmul(a, b)

    def batched_matmul(self, a: Any, b: Any) -> Any:
        """``a @ b`` for stacks of matrices (3 axes or more, the batch axes broadcast as matmul's):
        attention's products (the CPU runs a stack whose batch axes agree on the native pool, one
        BLAS call per matrix, see kernels/gemm.py)."""
        return self.xp.matmul(a, b)

    def linear(self, x: Any, w: Any, bias: Any) -> Any:
        """``x @ w + bias`` for ``x`` of 2 axes or more, a 2-D ``w`` and a 1-D ``bias`` of one
        dtype: the Linear op's forward, the same bits as the MatMul op's product (one GEMM over
        every row of ``x``) then the Add op's sum. A backend whose GEMM can add the bias itself
        saves the pass over the product (the CPU's float32 GEMM does)."""
        rows = math.prod(x.shape[:-1])
        product = self.matmul(x.reshape(rows, x.shape[-1]), w).reshape(*x.shape[:-1], w.shape[1])
        return self.add(product, bias)

    def add(self, a: Any, b: Any) -> Any:
        """``a + b`` with NumPy's broadcasting: the Add op's forward (the CPU adds a Linear's bias
        to each row of its product natively, see kernels/row_vector.py)."""
        return a + b

    def sum_rows(self, grad: Any) -> Any:
        """``grad.sum(axis=0)`` of a 2-D array: a broadcast input's gradient (a bias's), summed over
        the rows it was broadcast to."""
        return self.xp.sum(grad, axis=0)

    # ---------------------------------------------------------- fused layer kernels
    # Arrays are made C-contiguous first (a gradient may be a broadcast view); 2-D means
    # (rows, features) with the op's leading axes flattened by the caller.

    def fuses(self, dtype: Any) -> bool:
        """Whether the fused layer kernels take arrays of ``dtype``."""
        return np.dtype(dtype) in FUSED_DTYPES

    def gelu(self, x: Any, approximate: str) -> Any:
        """gelu(x), PyTorch's "none" (erf) or "tanh" form."""
        return kernels.gelu_forward(self.xp.ascontiguousarray(x), approximate)

    def gelu_backward(self, x: Any, grad: Any, approximate: str) -> Any:
        """grad * gelu'(x)."""
        xp = self.xp
        return kernels.gelu_backward(xp.ascontiguousarray(x), xp.ascontiguousarray(grad), approximate)

    def layer_norm(self, x: Any, weight: Any, bias: Any, eps: float) -> tuple[Any, Any, Any]:
        """(y, mean, rstd) of a LayerNorm over the last axis of a 2-D x (mean, rstd float64)."""
        xp = self.xp
        return kernels.layer_norm_forward(xp.ascontiguousarray(x), weight, bias, eps)

    def layer_norm_backward(self, x: Any, weight: Any, mean: Any, rstd: Any, grad: Any,
                            needs: tuple[bool, bool, bool]) -> tuple[Any, Any, Any]:
        """(grad_x, grad_weight, grad_bias), each None where ``needs`` says it is not wanted."""
        return kernels.layer_norm_backward(x, weight, mean, rstd, self.xp.ascontiguousarray(grad),
                                           input_grad=needs[0], weight_grad=needs[1], bias_grad=needs[2])

    def cross_entropy(self, logits: Any, targets: Any, ignore_index: int) -> tuple[Any, Any, int]:
        """(per-item losses, log-sum-exp per row, items not ignored) for 2-D logits, 1-D targets."""
        xp = self.xp
        return kernels.cross_entropy_forward(xp.ascontiguousarray(logits), targets.astype(np.int64, copy=False),
                                             ignore_index)

    def cross_entropy_backward(self, logits: Any, targets: Any, lse: Any, grad: Any, ignore_index: int) -> Any:
        """The logits' gradient from one gradient value per item."""
        xp = self.xp
        return kernels.cross_entropy_backward(logits, targets.astype(np.int64, copy=False), lse,
                                              xp.ascontiguousarray(grad, dtype=logits.dtype), ignore_index)

    def softmax(self, x: Any, bias: Any, scale: float) -> Any:
        """softmax(x scale + bias) over each row of a 2-D x; ``bias`` None or (L, columns), row r
        adding bias row r % L (an attention mask for every (L, S) block of rows)."""
        xp = self.xp
        return kernels.softmax_forward(xp.ascontiguousarray(x), None if bias is None else xp.ascontiguousarray(bias),
                                       scale)

    def softmax_backward(self, probs: Any, grad: Any, scale: float) -> Any:
        """probs (grad - sum(grad probs)) scale over each row: the gradient of softmax's x."""
        return kernels.softmax_backward(probs, self.xp.ascontiguousarray(grad), scale)

    def embedding_backward(self, ids: Any, grad: Any, rows: int) -> Any:
        """The (rows, dim) table gradient: the rows of ``grad`` (n, dim) summed by ``ids`` (n,)."""
        xp = self.xp
        return kernels.embedding_backward(xp.ascontiguousarray(ids, dtype=np.int64), xp.ascontiguousarray(grad), rows)

    def synchronize(self) -> None:  # noqa: B027 - a no-op is the right default for the CPU
        """Wait for queued device work (a no-op on the CPU)."""

    def device_scope(self) -> contextlib.AbstractContextManager:
        """Make this backend's device current while an op runs (a no-op on the CPU)."""
        return contextlib.nullcontext()

    def __repr__(self) -> str:
        return f"{self.name}({self.device})"
