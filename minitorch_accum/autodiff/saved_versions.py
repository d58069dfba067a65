"""The check of saved inputs: an array changed in place between forward and backward is refused.

A backward computes from what its forward saved. If an input's array is written in place in
between (an optimizer step between a forward and its backward, an in-place op, a hand-written
``p.data -= lr * g``), the gradient silently comes from the new values. PyTorch refuses the
writes its version counter sees; this library refuses them too, and the raw writes to ``.data``
that no counter can see, in two ways:

- **version**: every in-place write through the library's API calls ``TensorBase.bump_version()``:
  the optimizers' fused steps (``FusedGroup.write_back``), the ``nn.init`` initializers that
  overwrite a tensor (``zeros_``, ``normal_``, ``xavier_uniform_``, ...), ZeRO's gather and the
  parameter broadcast. (Tensor has no in-place methods: ``w += 1`` makes a new tensor; loading a
  record, ``Param.value = v`` and ``Module.to`` rebind the array, which leaves the saved one as it
  was.) A view made by an op (``w.mT``, a reshape, a slice) and a ``detach()`` count the writes
  of the tensor they view, so a tied head saved as ``wte.weight.mT`` is covered too.
- **checksum**: a 64-bit hash of the whole saved array's bytes (``checksum``), taken at the
  forward and again at the backward, for each saved array of a *leaf* or a view of one: a
  parameter, a batch, a constant, a detached tensor. Any raw write that changes a byte
  (``p.data[1:3] = 100``, ``p.data[3, 1] += 50``, ``p.data -= lr * g``, a write through a NumPy
  view of ``p.data``) is caught, but for a chance of 2^-64 that the hash stays the same. It costs
  the character transformer 0.6-0.8% of a micro-batch of 8 or 32 (``benchmarks/saved_checks.py``).

``Node`` (graph.py) records both when an op saves an input's array (by identity: ops save their
input arrays themselves) and ``check_saved`` compares them before the backward writes anything.
Not caught by default: a raw write to the array of an op's result that the user kept (``h =
layer(x); h.data[0] = 0`` before ``loss.backward()``): hashing every saved activation costs ~5%
of a micro-batch, so it is a debug setting, ``mta.autodiff.detect_raw_writes(True)``. Never
caught: raw writes on a GPU (a CuPy array is not hashed; the version counter works there). A
rebinding ``p.data = new`` is harmless and allowed: the saved array is the old one, unchanged.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from xxhash import xxh3_64_intdigest

__all__ = ["InPlaceModificationError", "check", "checksum", "detect_raw_writes", "modified_error",
           "raw_writes_detected", "watch"]


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


def checksum(array: Any) -> int | None:
    """A 64-bit hash (xxHash's XXH3) of a host array's bytes, in their order; None for a GPU array.

    XXH3 reads the ~0.4 MB of the character transformer's parameters in ~6 us (~69 GB/s, in
    cache) on the project's 2-core CPU machine; zlib's CRC-32 took 71 us (5.9 GB/s), which came to
    3.3% of a micro-batch of 8 (``benchmarks/saved_checks.py``), blake2b ran at 1.1 GB/s. A sum or
    an XOR of the words, as fast, misses a swap of two elements."""
    if not isinstance(array, np.ndarray):  # a CuPy array: not read back to the host
        return None
    if array.flags.c_contiguous:
        return xxh3_64_intdigest(array)
    if array.flags.f_contiguous:  # w.mT of a C-ordered weight: the same bytes, read in memory order
        return xxh3_64_intdigest(array.T)
    return xxh3_64_intdigest(np.ascontiguousarray(array))  # a strided view: its elements, copied once


class detect_raw_writes:  # noqa: N801 - a switch that is also a context manager, named like set_grad_enabled
    """Checksum every array a forward saves, op results too, not only the leaves' (a debug
    setting for the whole process, off by default: it reads every saved activation twice).

    ``mta.autodiff.detect_raw_writes(True)`` switches it on; ``with detect_raw_writes(True):``
    switches it on for a block and back to what it was after."""

    def __init__(self, enabled: bool = True) -> None:
        global _ALL_SAVED
        self._previous = _ALL_SAVED
        _ALL_SAVED = bool(enabled)

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        global _ALL_SAVED
        _ALL_SAVED = self._previous


#: detect_raw_writes: the saved arrays of op results are checksummed too (process-wide, not per
#: thread: a fit in a worker thread, as the terminal monitor runs it, sees the setting)
_ALL_SAVED = False


def raw_writes_detected() -> bool:
    """Whether ``detect_raw_writes`` is on (every saved array checksummed, not only the leaves')."""
    return _ALL_SAVED


def watch(index: int, tensor: Any) -> tuple[Any, ...]:
    """What ``check`` needs of input ``index``, ``tensor``, whose array the forward saved: (index,
    the input, the tensor whose writes it counts, that one's version, the saved array, its checksum
    or None). Graph reuse, and a replay of captured micro-batches, take it again per forward."""
    data = tensor.data
    source = tensor._view_of or tensor
    # a leaf (a parameter, a batch, a detached tensor) or a view of one: an array the user holds
    mark = checksum(data) if _ALL_SAVED or tensor._node is None or source._node is None else None
    return (index, tensor, source, source._version, data, mark)


def check(op: Any, watched: list[tuple[Any, ...]]) -> None:
    """InPlaceModificationError when an input ``watch`` saw was written since: its version moved, or
    its bytes' checksum (``op`` is the Function, named in the error)."""
    for index, tensor, source, version, array, mark in watched:
        if source._version != version:
            raise modified_error(op.op_name(), index, tensor, source, version)
        if mark is not None and checksum(array) != mark:
            raise modified_error(op.op_name(), index, tensor, source, None)


def modified_error(op: str, index: int, tensor: Any, source: Any, version: int | None) -> InPlaceModificationError:
    """The error for input ``index`` of ``op``: ``version`` is the one saved (None: the values changed)."""
    if version is not None:
        how = (f"its version went from {version} to {source.version}: it was written in place through the "
               "library (an optimizer step, an nn.init initializer, a parameter broadcast)")
    else:
        how = ("its bytes changed (their checksum differs): a raw write to .data, or to a NumPy view of it, "
               "which no version counter sees")
    viewed = "" if source is tensor else f", a view of {_describe(source)}"
    return InPlaceModificationError(
        f"backward: {op} saved its input {index}, {_describe(tensor)}{viewed}, in the forward pass, and {how} "
        "before this backward: the gradient would come from the new values. Run the forward again after "
        "changing it (an optimizer step belongs after the window's last backward)", op, tensor, index, source)


def _describe(tensor: Any) -> str:
    return f"{type(tensor).__name__}(shape={tensor.shape}, dtype={tensor.dtype.name})"
