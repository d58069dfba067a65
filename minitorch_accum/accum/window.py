"""The window as one value: which window it is, what it holds, and, once closed, its scale.

The Accumulator holds one (``acc.window``) and replaces it as micro-batches come in and the
window closes; its trace, ``explain`` and its checkpoint read it. Closed is the same fact as
having a scale: the scale is settled exactly when the window closes (and grows with any
clipping factor after), so the two are one field.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

__all__ = ["Window"]


@dataclass(frozen=True)
class Window:
    """One window of micro-batches.

    index: the window's number since the accumulator began (0 first).
    micro_batches, items: how many micro-batches ``backward()`` added, and their ``num_items``.
    scale: None while the window is open; once closed, the one factor that normalizes it
        (the normalization, a loss-scale unscale, any clipping factor).
    nonfinite: None until asked; then whether any of its gradients is inf or nan.
    """

    index: int = 0
    micro_batches: int = 0
    items: int = 0
    scale: float | None = None
    nonfinite: bool | None = None

    @property
    def closed(self) -> bool:
        """No more micro-batches: the scale is settled."""
        return self.scale is not None

    def with_micro_batch(self, items: int) -> Window:
        """This window with one more micro-batch of ``items`` items."""
        return replace(self, micro_batches=self.micro_batches + 1, items=self.items + items)

    def closed_with(self, scale: float) -> Window:
        """This window closed (or already closed), its factor now ``scale``."""
        return replace(self, scale=scale)

    def found(self, nonfinite: bool) -> Window:
        """This window, knowing whether its gradients hold inf or nan."""
        return replace(self, nonfinite=nonfinite)

    def next(self) -> Window:
        """The empty window after this one."""
        return Window(self.index + 1)
