"""The Burn-style gradients container: a value you hold, mapping tensors to gradient arrays.

Gradients are never stored on tensors: ``loss.backward()`` returns them, an
optimizer consumes them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from minitorch_accum.autodiff.graph import TensorBase

__all__ = ["Gradients"]


class Gradients:
    """Gradient arrays keyed by tensor identity (a parameter, or any leaf that requires grad)."""

    __slots__ = ("_entries",)

    def __init__(self, entries: dict[int, tuple[TensorBase, Any]] | None = None) -> None:
        self._entries: dict[int, tuple[TensorBase, Any]] = dict(entries or {})

    def __getitem__(self, tensor: TensorBase) -> Any:
        try:
            return self._entries[id(tensor)][1]
        except KeyError:
            raise KeyError(
                f"no gradient for tensor of shape {tuple(tensor.shape)}: it did not take part in "
                "the loss, or it does not require grad"
            ) from None

    def get(self, tensor: TensorBase, default: Any = None) -> Any:
        """The gradient of ``tensor``, or ``default`` when it has none."""
        entry = self._entries.get(id(tensor))
        return default if entry is None else entry[1]

    def __contains__(self, tensor: object) -> bool:
        return id(tensor) in self._entries

    def __iter__(self) -> Iterator[TensorBase]:
        return (tensor for tensor, _ in self._entries.values())

    def items(self) -> Iterator[tuple[TensorBase, Any]]:
        """(tensor, gradient array) pairs in the order the gradients were produced."""
        return iter(list(self._entries.values()))

    def values(self) -> Iterator[Any]:
        return (grad for _, grad in self._entries.values())

    def __len__(self) -> int:
        return len(self._entries)

    def set(self, tensor: TensorBase, grad: Any) -> None:
        """Register or replace the gradient of ``tensor``."""
        if tuple(grad.shape) != tuple(tensor.shape):
            raise ValueError(
                f"gradient shape {tuple(grad.shape)} does not match tensor shape {tuple(tensor.shape)}"
            )
        self._entries[id(tensor)] = (tensor, grad)

    __setitem__ = set

    def remove(self, tensor: TensorBase) -> Any:
        """Take the gradient of ``tensor`` out of the container and return it (Burn's ``remove``)."""
        return self._entries.pop(id(tensor))[1]

    def __repr__(self) -> str:
        shapes = ", ".join(str(tuple(t.shape)) for t in self)
        return f"Gradients({len(self)} tensors: {shapes})"
