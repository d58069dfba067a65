"""Modules made of parameters, as in Burn: a Module finds its Params and sub-modules itself.

Nothing needs registering: parameters, buffers and sub-modules are discovered from
the instance's attributes in the order they were assigned, which gives
``parameters()`` its definition order and ``named_parameters()`` its stable dotted
names (``"0.weight"``, ``"encoder.norm.bias"``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from minitorch_accum.autodiff import Tensor
from minitorch_accum.backend import (
    Backend,
    DeviceLike,
    backend_for,
    backend_of_array,
    resolve_dtype,
)

__all__ = ["Buffer", "Module", "Param", "RecordError"]


class RecordError(ValueError):
    """A record does not fit the module: missing or unexpected names, wrong shapes."""


class Param(Tensor):
    """A trainable tensor: a leaf that requires grad. ``value`` is its backend array."""

    def __init__(self, value: Any) -> None:
        super().__init__(value, requires_grad=True, _backend=backend_of_array(value))

    @property
    def value(self) -> Any:
        return self.data

    @value.setter
    def value(self, new: Any) -> None:
        if isinstance(new, Tensor):
            new = new.data
        if not self._backend.is_array(new):
            new = self._backend.asarray(new, dtype=self.dtype)
        if tuple(new.shape) != self.shape:
            raise ValueError(f"Param.value: new value has shape {tuple(new.shape)}, the parameter has {self.shape}")
        if new.dtype != self.dtype:
            raise TypeError(
                f"Param.value: new value has dtype {new.dtype.name}, the parameter has {self.dtype.name}; "
                "use module.to(dtype=...) to change a parameter's dtype"
            )
        self.data = new

    def _move(self, backend: Backend, dtype: np.dtype | None) -> None:
        data = self.data
        if dtype is not None and data.dtype != dtype:
            data = data.astype(dtype)
        if backend is not self._backend:
            data = backend.asarray(data)
            self._backend = backend
        self.data = data

    def __repr__(self) -> str:
        return f"Param(shape={self.shape}, dtype={self.dtype.name}, device={self.device})"


class Buffer:
    """State that is saved with a module but not trained (BatchNorm's running statistics)."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __repr__(self) -> str:
        return f"Buffer(shape={tuple(self.value.shape)}, dtype={self.value.dtype.name})"


class Module:
    """Base class of layers and models. Subclasses assign Params and Modules as attributes
    in ``__init__`` and implement ``forward``."""

    training: bool = True

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(f"{type(self).__name__} does not define forward()")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.forward(*args, **kwargs)

    # ------------------------------------------------------------ discovery
    def _members(self) -> Iterator[tuple[str, Any]]:
        """(name, Param | Buffer | Module) in assignment order; lists and tuples of modules
        contribute ``name.i``."""
        for name, value in vars(self).items():
            if isinstance(value, Param | Buffer | Module):
                yield name, value
            elif isinstance(value, list | tuple):
                for i, item in enumerate(value):
                    if isinstance(item, Module):
                        yield f"{name}.{i}", item

    def named_modules(self, prefix: str = "") -> Iterator[tuple[str, Module]]:
        """This module and every sub-module, with dotted names ('' for this one)."""
        yield prefix, self
        for name, value in self._members():
            if isinstance(value, Module):
                yield from value.named_modules(f"{prefix}.{name}" if prefix else name)

    def modules(self) -> Iterator[Module]:
        return (m for _, m in self.named_modules())

    def named_parameters(self) -> Iterator[tuple[str, Param]]:
        """(dotted name, Param) in definition order; a shared Param appears once."""
        return self._ordered(Param)

    def parameters(self) -> list[Param]:
        return [p for _, p in self.named_parameters()]

    def named_buffers(self) -> Iterator[tuple[str, Buffer]]:
        return self._ordered(Buffer)

    def _ordered(self, kind: type) -> Iterator[tuple[str, Any]]:
        """Depth-first, attribute order: a module's members in the order they were assigned."""
        seen: set[int] = set()
        stack: list[tuple[str, Any]] = [("", self)]
        while stack:
            path, value = stack.pop()
            if isinstance(value, Module):
                members = [(f"{path}.{n}" if path else n, v) for n, v in value._members()]
                stack.extend(reversed(members))
            elif isinstance(value, kind) and id(value) not in seen:
                seen.add(id(value))
                yield path, value

    def num_params(self) -> int:
        """Number of trainable scalars."""
        return sum(p.size for p in self.parameters())

    # ----------------------------------------------------------------- modes
    def train(self, mode: bool = True) -> Module:
        """Training mode (dropout active, batch norm uses batch statistics); returns self."""
        for module in self.modules():
            module.training = mode
        return self

    def eval(self) -> Module:
        return self.train(False)

    def to(self, device: DeviceLike | None = None, dtype: Any = None) -> Module:
        """Move and/or cast every parameter and buffer in place (Params keep their identity)."""
        backend = backend_for(device) if device is not None else None
        target = resolve_dtype(dtype) if dtype is not None else None
        for _, param in self.named_parameters():
            param._move(backend or param._backend, target)
        for _, buffer in self.named_buffers():
            value = buffer.value
            if target is not None and value.dtype.kind == "f":
                value = value.astype(target)
            if backend is not None:
                value = backend.asarray(value)
            buffer.value = value
        return self

    # ---------------------------------------------------------------- record
    def to_record(self) -> dict[str, np.ndarray]:
        """Every parameter and buffer as a host NumPy array, by dotted name (Burn's record)."""
        record = {name: np.array(p._backend.to_host(p.data), copy=True) for name, p in self.named_parameters()}
        for name, buffer in self.named_buffers():
            record[name] = np.array(backend_of_array(buffer.value).to_host(buffer.value), copy=True)
        return record

    def load_record(self, record: Mapping[str, Any]) -> Module:
        """Load arrays by dotted name into the parameters and buffers (cast to their dtype).

        Every name must match and every shape must agree; otherwise nothing is changed
        and a RecordError lists the problems."""
        targets: dict[str, Any] = dict(self.named_parameters())
        targets.update(self.named_buffers())
        missing = sorted(set(targets) - set(record))
        unexpected = sorted(set(record) - set(targets))
        problems = []
        if missing:
            problems.append(f"missing: {', '.join(missing)}")
        if unexpected:
            problems.append(f"unexpected: {', '.join(unexpected)}")
        for name, target in targets.items():
            if name in record:
                have = tuple(np.shape(record[name]))
                want = tuple(target.value.shape)
                if have != want:
                    problems.append(f"{name}: record has shape {have}, module has {want}")
        if problems:
            raise RecordError(f"load_record: record does not fit {type(self).__name__}: " + "; ".join(problems))
        for name, target in targets.items():
            backend = backend_of_array(target.value)
            target.value = backend.asarray(np.asarray(record[name]).astype(target.value.dtype))
        return self

    # ------------------------------------------------------------------ repr
    def extra_repr(self) -> str:
        return ""

    def __repr__(self) -> str:
        children = [(n, v) for n, v in self._members() if isinstance(v, Module)]
        head = f"{type(self).__name__}({self.extra_repr()}"
        if not children:
            return head + ")"
        lines = [head]
        for name, child in children:
            body = repr(child).replace("\n", "\n  ")
            lines.append(f"  ({name}): {body}")
        return "\n".join(lines) + "\n)"
