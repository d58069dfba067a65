"""Modules made of parameters, as in Burn: a Module finds its Params and sub-modules itself.

Nothing needs registering: parameters, buffers and sub-modules are discovered from
the instance's attributes in the order they were assigned, which gives
``parameters()`` its definition order and ``named_parameters()`` its stable dotted
names (``"0.weight"``, ``"encoder.norm.bias"``). Lists, tuples and dicts (string keys)
of them are searched too, to any depth (``"blocks.0.proj.weight"``, ``"heads.q.weight"``);
a set holding one, or a dict key that is not a string, is an error rather than a
parameter silently left out of training.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any, NamedTuple

import numpy as np

from minitorch_accum.autodiff import Tensor
from minitorch_accum.autodiff.conversion import device_and_dtype
from minitorch_accum.autodiff.grad_mode import float_errors_silenced, silence_float_errors
from minitorch_accum.autodiff.post_order import post_order
from minitorch_accum.backend import (
    Backend,
    backend_for,
    backend_of_array,
    is_float_dtype,
    resolve_dtype,
)

__all__ = ["Buffer", "IncompatibleKeys", "Module", "Param", "RecordError", "weight_orientation"]

#: the values ``Module.replay_state`` keeps as they are
_SCALARS = (bool, int, float, str, type(None))


class RecordError(ValueError):
    """A record does not fit the module: missing or unexpected names, wrong shapes."""


class IncompatibleKeys(NamedTuple):
    """What ``load_state_dict`` could not match, as PyTorch returns it: the module's names the
    state lacked, and the state's names the module does not have."""

    missing_keys: list[str]
    unexpected_keys: list[str]


class Param(Tensor):
    """A trainable tensor: a leaf that requires grad. ``value`` is its backend array.

    ``layout`` says which axis is which for a 2-D weight a layer made: ``"in_out"`` for a
    Linear's (y = x @ W), ``"out_in"`` for an Embedding's (vocab, dim) table, which is an
    output projection's (out, in). A tied layer reads it to orient a square weight; a Param
    you make yourself has ``None`` and is taken in the layout of the layer it is given to.
    """

    def __init__(self, value: Any, layout: str | None = None) -> None:
        if isinstance(value, Tensor):  # nn.Param(mta.ones(d)), as PyTorch's nn.Parameter(torch.ones(d))
            value = value.data
        super().__init__(value, requires_grad=True, _backend=backend_of_array(value))
        self.layout = layout

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


def weight_orientation(layer: str, param: Any, own: tuple[int, int], own_layout: str) -> bool:
    """Whether a Param given to ``layer`` as its 2-D weight is to be used transposed.

    ``own`` is the layer's shape in its ``own_layout`` ("in_out" for Linear, "out_in" for an
    Embedding's table). A Param of the transposed shape is used transposed: that is weight
    tying written the PyTorch way (``lm_head.weight = wte.weight``). A square Param is
    taken as its ``layout`` says (None: the layer's own).
    """
    if not isinstance(param, Param):
        raise TypeError(f"{layer}.weight must be a Param, got {type(param).__name__}")
    flipped = (own[1], own[0])
    other_layout = "out_in" if own_layout == "in_out" else "in_out"
    if param.shape not in (own, flipped):
        names = "(in, out)" if own_layout == "in_out" else "(num_embeddings, dim)"
        raise ValueError(
            f"{layer}.weight: a Param of shape {param.shape} fits neither {names} = {own} nor its "
            f"transpose {flipped} (a tied weight from the other kind of layer)"
        )
    if own == flipped:
        return param.layout == other_layout
    return param.shape == flipped


class Buffer(Tensor):
    """State that is saved with a module but not trained (BatchNorm's running statistics, a
    causal mask): a tensor that takes no gradient. ``value`` is its backend array."""

    def __init__(self, value: Any) -> None:
        if isinstance(value, Tensor):
            value = value.data
        super().__init__(value, _backend=backend_of_array(value))

    @property
    def value(self) -> Any:
        return self.data

    @value.setter
    def value(self, new: Any) -> None:
        # Module.to and load_record assign arrays of another dtype or device
        self.data = new
        self._backend = backend_of_array(new)

    def __repr__(self) -> str:
        return f"Buffer(shape={self.shape}, dtype={self.dtype.name}, device={self.device})"


class Module:
    """Base class of layers and models. Subclasses assign Params and Modules as attributes
    in ``__init__`` and implement ``forward``.

    Calling a module runs ``forward`` with NumPy's floating-point warnings off, as every op
    runs (inf and nan are results): the outermost call enters ``np.errstate`` once for the
    whole forward instead of each op entering it (``autodiff.grad_mode.silence_float_errors``)."""

    training: bool = True

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(f"{type(self).__name__} does not define forward()")

    def register_buffer(self, name: str, tensor: Any, persistent: bool = True) -> None:
        """``self.<name> = tensor`` as a Buffer (saved in records, moved by ``to()``), or as a
        plain tensor attribute with ``persistent=False``, as PyTorch's register_buffer."""
        setattr(self, name, Buffer(tensor) if persistent else tensor)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        own = self._own_float_dtype()
        if own is not None:
            for value in (*args, *kwargs.values()):
                given = getattr(value, "dtype", None)
                if given is not None and hasattr(value, "shape") and is_float_dtype(given) and given != own:
                    raise TypeError(
                        f"{type(self).__name__}({self.extra_repr()}): input of dtype {given.name} into parameters "
                        f"of dtype {own.name}; cast the input (x.to(mta.{own.name})) or the model "
                        f"(model.to(mta.{given.name}))")
        if float_errors_silenced():
            return self.forward(*args, **kwargs)
        # the outermost module's call silences NumPy's floating-point warnings once for the
        # whole forward (inf and nan are results), so that its ops need not each
        with silence_float_errors():
            return self.forward(*args, **kwargs)

    def _own_float_dtype(self) -> np.dtype | None:
        """The dtype of this module's own Params (not its sub-modules'), which a float input must
        have, as PyTorch's layers require; None when it holds none (a container, an activation)."""
        dtypes = {v.dtype for v in vars(self).values() if isinstance(v, Param)}
        return dtypes.pop() if len(dtypes) == 1 else None

    # ------------------------------------------------------------ discovery
    def _members(self) -> Iterator[tuple[str, Any]]:
        """(name, Param | Buffer | Module) in assignment order; those held in lists, tuples and
        dicts are named ``name.i`` / ``name.key``."""
        for name, value in vars(self).items():
            yield from _held(self, name, name, value)

    def named_modules(self, prefix: str = "") -> Iterator[tuple[str, Module]]:
        """This module and every sub-module, with dotted names ('' for this one); a module
        reachable twice (shared, or a cycle) appears once."""
        return self._ordered(Module, prefix)

    def modules(self) -> Iterator[Module]:
        return (m for _, m in self.named_modules())

    def apply(self, fn: Callable[[Module], Any]) -> Module:
        """Call ``fn`` on every sub-module and then on this one (PyTorch's order: children before
        their parent, in attribute order); a module reachable twice is visited once. Returns self.

        ``model.apply(init)`` with ``init`` calling ``nn.init.xavier_uniform_(m.weight)`` for each
        Linear is PyTorch's way of initializing a model."""
        order = post_order(self, lambda module: [v for _, v in module._members() if isinstance(v, Module)])
        for module in order:
            fn(module)
        return self

    def replay_state(self) -> tuple[list[Any], tuple[Any, ...]]:
        """What decides which tensors this module's forward reads, for ``autodiff.Replay``'s guard:
        every tensor (Param, Buffer, plain tensor) and array it or a sub-module holds, each once, in
        a stable order; and everything else they hold as a hashable tuple (each module's training
        flag, numbers and strings by value, other objects by identity). Read on every replayed call,
        so it names nothing (~20 us for the character transformer, ``named_parameters`` ~70)."""
        tensors: list[Any] = []
        state: list[Any] = []
        seen: set[int] = set()
        stack: list[Any] = [self]
        own = Module._members
        while stack:
            value = stack.pop()
            kind = type(value)
            if kind in _SCALARS:
                state.append(value)
            elif isinstance(value, Module):
                if id(value) in seen:
                    continue
                seen.add(id(value))
                state.append(value.training)
                if kind._members is own:
                    attributes = vars(value)
                    if "training" in attributes:  # set by train()/eval(): counted above, as when a class default
                        stack.extend([v for k, v in attributes.items() if k != "training"])
                    else:
                        stack.extend(attributes.values())
                else:  # a container names its members itself
                    stack.extend([member for _, member in value._members()])
            elif isinstance(value, Tensor | np.ndarray):
                if id(value) not in seen:
                    seen.add(id(value))
                    tensors.append(value)
            elif kind is list or kind is tuple:
                state.append(len(value))
                stack.extend(value)
            elif kind is dict:
                state.append(tuple(value))
                stack.extend(value.values())
            else:  # another object: itself, or who it is when it cannot be hashed
                state.append(value if kind.__hash__ is not None else id(value))
        return tensors, tuple(state)

    def named_parameters(self) -> Iterator[tuple[str, Param]]:
        """(dotted name, Param) in definition order; a shared Param appears once."""
        return self._ordered(Param)

    def parameters(self) -> list[Param]:
        return [p for _, p in self.named_parameters()]

    def named_buffers(self) -> Iterator[tuple[str, Buffer]]:
        return self._ordered(Buffer)

    def _ordered(self, kind: type, prefix: str = "") -> Iterator[tuple[str, Any]]:
        """Depth-first, attribute order: a module's members in the order they were assigned;
        each object once, under the first name it is found by."""
        seen: set[int] = set()
        stack: list[tuple[str, Any]] = [(prefix, self)]
        while stack:
            path, value = stack.pop()
            if id(value) in seen:
                continue
            seen.add(id(value))
            if isinstance(value, kind):
                yield path, value
            if isinstance(value, Module):
                members = [(f"{path}.{n}" if path else n, v) for n, v in value._members()]
                stack.extend(reversed(members))

    def num_params(self) -> int:
        """Number of trainable scalars."""
        return sum(p.size for p in self.parameters())

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Always an error that says what to do instead: parameters hold no gradients here."""
        raise TypeError(
            f"{type(self).__name__}.zero_grad(): there is nothing to zero: gradients are values here, not "
            "attributes of the parameters (Burn's design). Each loss.backward() returns a new Gradients "
            "container; an Accumulator starts its next window with acc.zero() after the optimizer's step"
        )

    # ----------------------------------------------------------------- modes
    def train(self, mode: bool = True) -> Module:
        """Training mode (dropout active, batch norm uses batch statistics); returns self."""
        for module in self.modules():
            module.training = mode
        return self

    def eval(self) -> Module:
        return self.train(False)

    def to(self, *args: Any, device: Any = None, dtype: Any = None) -> Module:
        """Move and/or cast every parameter and buffer in place (Params keep their identity); the
        arguments as ``Tensor.to`` takes them: ``model.to(mta.float64)``, ``model.to("cuda")``."""
        where, kind = device_and_dtype(f"{type(self).__name__}.to", args, device, dtype)
        backend = backend_for(where) if where is not None else None
        target = resolve_dtype(kind) if kind is not None else None
        for _, param in self.named_parameters():
            param._move(backend or param.backend, target)
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
        record = {name: np.array(p.backend.to_host(p.data), copy=True) for name, p in self.named_parameters()}
        for name, buffer in self.named_buffers():
            record[name] = np.array(backend_of_array(buffer.value).to_host(buffer.value), copy=True)
        return record

    def load_record(self, record: Mapping[str, Any]) -> Module:
        """Load arrays by dotted name into the parameters and buffers (cast to their dtype).

        Every name must match and every shape must agree; otherwise nothing is changed
        and a RecordError lists the problems."""
        self._load(record, strict=True)
        return self

    def state_dict(self) -> dict[str, np.ndarray]:
        """PyTorch's name for ``to_record``: every parameter and buffer as a host NumPy copy, by
        dotted name, in this library's layouts (a Linear's weight is (in, out))."""
        return self.to_record()

    def load_state_dict(self, state_dict: Mapping[str, Any], strict: bool = True) -> IncompatibleKeys:
        """PyTorch's name for ``load_record``. ``strict=False`` loads the names that match and
        returns those that did not (``IncompatibleKeys``), as PyTorch does; a shape that does not
        agree is an error either way, and then nothing is changed."""
        return self._load(state_dict, strict)

    def _load(self, record: Mapping[str, Any], strict: bool) -> IncompatibleKeys:
        targets: dict[str, Any] = dict(self.named_parameters())
        targets.update(self.named_buffers())
        missing = sorted(set(targets) - set(record))
        unexpected = sorted(set(record) - set(targets))
        problems = []
        if missing and strict:
            problems.append(f"missing: {', '.join(missing)}")
        if unexpected and strict:
            problems.append(f"unexpected: {', '.join(unexpected)}")
        targets = {name: target for name, target in targets.items() if name in record}
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
        return IncompatibleKeys(missing, unexpected)

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


def _holds_state(value: Any, seen: set[int]) -> bool:
    """Whether ``value`` is, or a container inside it holds, a Param, Buffer or Module."""
    if isinstance(value, Param | Buffer | Module):
        return True
    if isinstance(value, list | tuple | set | frozenset | dict) and id(value) not in seen:
        seen.add(id(value))
        items = value.values() if isinstance(value, dict) else value
        return any(_holds_state(item, seen) for item in items)
    return False


def _held(owner: Module, attribute: str, path: str, value: Any) -> Iterator[tuple[str, Any]]:
    """The Params, Buffers and Modules in ``value`` with their dotted names (lists, tuples and
    dicts searched to any depth); a set or a non-string key holding one is an error."""
    if isinstance(value, Param | Buffer | Module):
        yield path, value
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            yield from _held(owner, attribute, f"{path}.{i}", item)
    elif isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str) and _holds_state(item, set()):
                raise TypeError(
                    f"{type(owner).__name__}.{attribute}: dict key {key!r} ({type(key).__name__}) holds a "
                    "parameter or module; keys must be strings, they become parameter names "
                    "(nn.ModuleDict takes string keys)"
                )
            yield from _held(owner, attribute, f"{path}.{key}", item)
    elif isinstance(value, set | frozenset) and _holds_state(value, set()):
        raise TypeError(
            f"{type(owner).__name__}.{attribute}: a {type(value).__name__} holds a parameter or module; a set "
            "has no order, so they could get no stable names: use a list or nn.ModuleList"
        )
