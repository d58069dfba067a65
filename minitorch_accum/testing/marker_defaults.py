"""The ``accumulation`` marker's keywords as a fixture's defaults; shared by the plugin's fixture and
the torch fixture, and loading nothing but this module (the torch fixture's module loads neither
torch nor the library)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pytest

__all__ = ["MARKER", "marker_defaults"]

MARKER = "accumulation"


def marker_defaults(request: pytest.FixtureRequest, keywords: str) -> dict[str, Any]:
    """The keywords of every ``accumulation`` mark on the test, the closest mark winning; a mark with
    positional arguments is refused, naming the ``keywords`` it takes (``"dtype=, splits=, ..."``)."""
    defaults: dict[str, Any] = {}
    for mark in reversed(list(request.node.iter_markers(MARKER))):
        if mark.args:
            raise TypeError(f"@pytest.mark.{MARKER} takes keywords only ({keywords}), got {mark.args}")
        defaults.update(mark.kwargs)
    return defaults
