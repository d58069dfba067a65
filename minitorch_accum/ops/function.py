"""The op protocol: a ``Function`` has a forward and, beside it, its backward.

Both work on backend arrays (NumPy or CuPy), never on Tensors: the autodiff layer
above builds the graph, calls ``forward``, and later calls ``backward`` with the
gradient of the output. ``backward`` returns one gradient per array input (None
where an input needs none) in the *broadcast* shape; the engine sums it back to
each input's own shape in one place.

inf and nan are results, not errors (as on a GPU): the autodiff layer runs forward
and backward with NumPy's floating-point warnings silenced.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

from minitorch_accum.backend.base import Backend

__all__ = ["Context", "Function", "GradFactors", "OpError"]

#: ``grad_factors(ctx, grad, index)``: see ``Function.grad_factors``
GradFactors = Callable[["Context", Any, int], "tuple[Any, Any] | None"]


class OpError(ValueError):
    """An op was called with arguments it cannot accept (shapes, axes, dtypes)."""


class Context:
    """What an op's forward leaves for its backward: saved arrays and small facts."""

    __slots__ = ("__dict__", "backend", "needs_input_grad", "saved", "xp")

    def __init__(self, backend: Backend, needs_input_grad: tuple[bool, ...]) -> None:
        self.backend = backend
        self.xp = backend.xp
        self.needs_input_grad = needs_input_grad
        self.saved: tuple[Any, ...] = ()

    if TYPE_CHECKING:
        # an op's forward keeps its small facts (ctx.axis, ctx.shape...) in __dict__ under names
        # of its own choosing: to the type checker, any name of any type
        def __getattr__(self, name: str) -> Any: ...
        def __setattr__(self, name: str, value: Any) -> None: ...

    def save(self, *arrays: Any) -> None:
        """Keep arrays alive until backward (they are released right after it)."""
        self.saved = arrays

    def release(self) -> None:
        """Drop everything saved, so activations are freed as soon as backward used them."""
        self.saved = ()
        self.__dict__.clear()


class Function(ABC):
    """Base class of every op. Subclasses define ``forward`` and ``backward`` as static methods."""

    #: An op whose gradient of an input can be one plain GEMM offers it as two factors:
    #: ``grad_factors(ctx, grad, index)`` returns 2-D ``(A, B)`` with ``A @ B`` equal to the
    #: gradient of input ``index`` (or None where, for that call, it is not one GEMM), so that a
    #: sink fusing GEMMs lets the GEMM itself write it into a persistent buffer (beta = 1).
    #: None, the default, says that the op never does: the engine then always calls ``backward``.
    grad_factors: ClassVar[GradFactors | None] = None

    @staticmethod
    @abstractmethod
    def forward(ctx: Context, *inputs: Any, **params: Any) -> Any:
        """Compute the output array from the input arrays; save what backward needs."""

    @staticmethod
    @abstractmethod
    def backward(ctx: Context, grad: Any) -> tuple[Any | None, ...]:
        """Gradients of the inputs (in the broadcast shape) from the output's gradient."""

    @classmethod
    def op_name(cls) -> str:
        return cls.__name__.lower()

