"""The terminal monitor of a training run (``maccum train --tui``; needs the ``tui`` extra:
Textual and textual-plotext). Importing this package imports Textual; ``tui_missing()`` says
whether it can be, without importing it."""

from __future__ import annotations

import importlib.util

__all__ = ["tui_missing"]


def tui_missing() -> str | None:
    """None when the monitor can run, else which package is missing."""
    for module, package in (("textual", "textual"), ("textual_plotext", "textual-plotext")):
        if importlib.util.find_spec(module) is None:
            return package
    return None
