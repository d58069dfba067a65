"""The one depth-first walk the package makes over a graph: backward's node order, a replayed
graph's step order and ``Module.apply``'s module order. Iterative (no recursion limit on a deep
graph) and deterministic (children in their given order, never a set's)."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from typing import TypeVar

__all__ = ["post_order"]

T = TypeVar("T")


def post_order(root: T, children: Callable[[T], Iterable[T]], *, key: Callable[[T], Hashable] = id,
               reached: Callable[[T], None] | None = None) -> list[T]:
    """Every item reachable from ``root``, each after all of its children, the first child's
    subtree first; an item reachable twice (by ``key``, identity by default) appears once, where
    the walk first reaches it. ``reached(item)`` is called as the walk first reaches each item,
    before any of its children (where backward checks a node)."""
    order: list[T] = []
    seen: set[Hashable] = set()
    stack: list[tuple[T, bool]] = [(root, False)]
    while stack:
        item, children_done = stack.pop()
        if children_done:
            order.append(item)
            continue
        if key(item) in seen:
            continue
        seen.add(key(item))
        if reached is not None:
            reached(item)
        stack.append((item, True))
        stack.extend((child, False) for child in reversed(list(children(item))))
    return order
