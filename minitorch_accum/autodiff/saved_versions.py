"""The version check of saved inputs: an array changed in place between forward and backward is refused.

A backward computes from what its forward saved. If an input's array is written in place in
between (an optimizer step between a forward and its backward, an in-place op), the gradient
silently comes from the new values. PyTorch refuses that through a version counter; so does
this library, in two ways, neither of which copies or reads the data:

- **version**: every in-place write through the library's API (the optimizers' fused steps,
  ZeRO's gather, the parameter broadcast, any in-place Tensor method) calls
  ``TensorBase.bump_version()``. A view made by an op (``w.mT``, a reshape, a slice) counts the
  writes of the tensor it views, so a tied head saved as ``wte.weight.mT`` is covered too.
- **fingerprint**: for a parameter (a leaf that requires grad) or a view of one, on the host, the
  first and last element of the saved array at the forward; a raw write ``p.data[...] = v`` or
  ``p.data -= lr * g``, which the counter cannot see, almost always changes one of them.

``Node`` (graph.py) records both when an op saves an input's array (by identity: ops save their
input arrays themselves) and checks them before the backward runs anything. What is not caught:
a raw write that leaves the first and last element of a parameter as they were (``p.data[3] =
0``); raw writes to any other array (a batch, an op result: only the counter watches those);
raw writes on a GPU (reading an element there would synchronize the device at every op); and a
rebinding ``p.data = new``, which is harmless: the saved array is the old one, unchanged.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["InPlaceModificationError", "fingerprint", "modified_error", "same_fingerprint"]


class InPlaceModificationError(RuntimeError):
    """backward() found an input its forward saved changed in place since: ``op``, ``index`` (which
    of its inputs), ``tensor`` and ``source`` (the tensor written: ``tensor`` or what it views)."""

    def __init__(self, message: str, op: str, tensor: Any, index: int, source: Any) -> None:
        super().__init__(message)
        self.op = op
        self.tensor = tensor
        self.index = index
        self.source = source

    def naming(self, name: str) -> InPlaceModificationError:
        """The same error, the written tensor called ``name`` (the Accumulator knows parameter names)."""
        text = str(self).replace(_describe(self.source), f"parameter {name!r} {_describe(self.source)}", 1)
        return InPlaceModificationError(text, self.op, self.tensor, self.index, self.source)


def fingerprint(data: Any) -> tuple[Any, Any] | None:
    """The first and last element of a host array (None on a GPU, where the read would
    synchronize the device at every op, and for an empty array)."""
    if type(data) is not np.ndarray or not data.size:
        return None
    return data.item(0), data.item(-1)


def same_fingerprint(before: tuple[Any, Any], array: Any) -> bool:
    after = fingerprint(array)
    return after is not None and all(a == b or (a != a and b != b) for a, b in zip(before, after, strict=True))


def modified_error(op: str, index: int, tensor: Any, source: Any, version: int | None) -> InPlaceModificationError:
    """The error for input ``index`` of ``op``: ``version`` is the one saved (None: the values changed)."""
    if version is not None:
        how = (f"its version went from {version} to {source.version}: it was written in place through the "
               "library (an optimizer step, or an in-place op)")
    else:
        how = "its values changed (a raw write to .data, which no version counter sees)"
    viewed = "" if source is tensor else f", a view of {_describe(source)}"
    return InPlaceModificationError(
        f"backward: {op} saved its input {index}, {_describe(tensor)}{viewed}, in the forward pass, and {how} "
        "before this backward: the gradient would come from the new values. Run the forward again after "
        "changing it (an optimizer step belongs after the window's last backward)", op, tensor, index, source)


def _describe(tensor: Any) -> str:
    return f"{type(tensor).__name__}(shape={tensor.shape}, dtype={tensor.dtype.name})"
