"""Containers: ModuleList and ModuleDict (PyTorch's), and Sequential, a ModuleList that runs its layers in order.

Their members are named by position ("0", "1", ...) or key, so a model written with
them has the parameter names a PyTorch user expects ("h.0.attn.weight").
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from minitorch_accum.nn.module import Module

__all__ = ["ModuleDict", "ModuleList", "Sequential"]


def _checked(owner: str, label: Any, value: Any) -> Module:
    if not isinstance(value, Module):
        raise TypeError(f"{owner}: item {label} is a {type(value).__name__}, not a Module")
    return value


class ModuleList(Module):
    """A list of modules whose parameters belong to the module that holds it."""

    def __init__(self, modules: Iterable[Module] = ()) -> None:
        self._items: list[Module] = []
        self.extend(modules)

    def _members(self) -> Iterator[tuple[str, Any]]:
        yield from ((str(i), module) for i, module in enumerate(self._items))

    def append(self, module: Module) -> ModuleList:
        self._items.append(_checked(type(self).__name__, len(self._items), module))
        return self

    def extend(self, modules: Iterable[Module]) -> ModuleList:
        for module in modules:
            self.append(module)
        return self

    def insert(self, index: int, module: Module) -> None:
        self._items.insert(index, _checked(type(self).__name__, index, module))

    def __getitem__(self, index: int | slice) -> Any:
        """The module at ``index``; a slice gives a container of the same kind."""
        if isinstance(index, slice):
            return self._sliced(self._items[index])
        return self._items[index]

    def _sliced(self, modules: list[Module]) -> ModuleList:
        return ModuleList(modules)

    def __setitem__(self, index: int, module: Module) -> None:
        self._items[index] = _checked(type(self).__name__, index, module)

    def __delitem__(self, index: int | slice) -> None:
        del self._items[index]

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._items)


class Sequential(ModuleList):
    """Modules applied one after another, named "0", "1", ... as in PyTorch."""

    def __init__(self, *layers: Module) -> None:
        super().__init__(layers)

    def _sliced(self, modules: list[Module]) -> Sequential:
        return Sequential(*modules)

    def forward(self, x: Any) -> Any:
        for layer in self._items:
            x = layer(x)
        return x


class ModuleDict(Module):
    """Modules by string key; ``d["wte"]`` and ``d.wte`` both work, as in PyTorch."""

    def __init__(self, modules: Mapping[str, Module] | Iterable[tuple[str, Module]] | None = None) -> None:
        self._items: dict[str, Module] = {}
        if modules is not None:
            self.update(modules)

    def _members(self) -> Iterator[tuple[str, Any]]:
        yield from self._items.items()

    def update(self, modules: Mapping[str, Module] | Iterable[tuple[str, Module]]) -> None:
        pairs = modules.items() if isinstance(modules, Mapping) else modules
        for key, module in pairs:
            self[key] = module

    def __getitem__(self, key: str) -> Module:
        return self._items[key]

    def __setitem__(self, key: str, module: Module) -> None:
        if not isinstance(key, str):
            raise TypeError(f"ModuleDict: keys must be strings (they become parameter names), got {key!r}")
        self._items[key] = _checked("ModuleDict", repr(key), module)

    def __delitem__(self, key: str) -> None:
        del self._items[key]

    def __getattr__(self, name: str) -> Module:
        # only called when normal lookup fails: the keys read as attributes (self.transformer.wte)
        items = self.__dict__.get("_items")
        if items is not None and name in items:
            return items[name]
        raise AttributeError(f"{type(self).__name__} has no attribute or key {name!r}")

    def __setattr__(self, name: str, value: Any) -> None:
        if isinstance(value, Module) and not name.startswith("_"):
            self[name] = value
        else:
            super().__setattr__(name, value)

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def keys(self) -> Iterable[str]:
        return self._items.keys()

    def values(self) -> Iterable[Module]:
        return self._items.values()

    def items(self) -> Iterable[tuple[str, Module]]:
        return self._items.items()
