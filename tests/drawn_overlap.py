"""What a drawn figure covers: the boxes of its legends, texts and insets against the data it shows,
and against each other (titles, axis and tick labels too).

Shared by the tests of the command-line figures (explain, compare, precision). The figure is drawn
once with the Agg renderer; every box is in display coordinates, as on the PNG. Data is what the
axes plot: each line (its path as drawn, steps included), each bar of a bar container and each bar
of a broken_barh; a box "covers" data when a line's path crosses it or a bar's box meets it,
within the axes that clips the data. Shading (axvspan) and grid lines are backgrounds, not data.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.cbook import STEP_LOOKUP_MAP
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.path import Path
from matplotlib.transforms import Bbox


def drawn(fig: Figure) -> Any:
    """Draw ``fig`` (a Figure made without pyplot) and return its renderer."""
    canvas = fig.canvas if isinstance(fig.canvas, FigureCanvasAgg) else FigureCanvasAgg(fig)
    canvas.draw()
    return canvas.get_renderer()


def _line_path(line: Line2D) -> Path | None:
    xy = np.asarray(line.get_xydata(), dtype=float)
    if len(xy) < 2 or not line.get_visible() or line.get_linestyle() in ("None", " ", ""):
        return None
    step = STEP_LOOKUP_MAP.get(line.get_drawstyle())
    if step is not None and line.get_drawstyle() != "default":
        xy = np.column_stack(step(xy[:, 0], xy[:, 1]))
    return Path(line.get_transform().transform(xy))


def data_of(ax: Axes) -> list[tuple[str, Path | Bbox]]:
    """(what, drawn path or box) of each piece of data ``ax`` shows."""
    pieces: list[tuple[str, Path | Bbox]] = []
    for line in ax.get_lines():
        path = _line_path(line)
        if path is not None and not line.get_label().startswith("_gridline"):
            pieces.append((f"line {line.get_label()!r}", path))
    for collection in ax.collections:
        transform = collection.get_transform()
        for path in collection.get_paths():
            pieces.append((f"bar of {collection.get_label()!r}", path.transformed(transform).get_extents()))
    for container in ax.containers:
        for patch in getattr(container, "patches", []):
            pieces.append((f"bar {patch.get_label()!r}", patch.get_window_extent()))
    return pieces


def labels_of(fig: Figure, renderer: Any) -> list[tuple[str, Bbox]]:
    """(what, box) of every legend, text, inset, title, axis label and tick label of ``fig``."""
    boxes = [(f"figure legend {i}", legend.get_window_extent(renderer)) for i, legend in enumerate(fig.legends)]
    texts = [("the figure's title", fig._suptitle)] if fig._suptitle is not None else []
    for ax in fig.axes:
        legend = ax.get_legend()
        if legend is not None:
            boxes.append((f"legend of {_name(ax)}", legend.get_window_extent(renderer)))
        texts += [(f"text {text.get_text()!r}", text) for text in ax.texts]
        texts += [(f"title of {_name(ax)}", ax.title), (f"x label of {_name(ax)}", ax.xaxis.label),
                  (f"y label of {_name(ax)}", ax.yaxis.label)]
        texts += [(f"tick label {text.get_text()!r} of {_name(ax)}", text) for text in _drawn_tick_labels(ax)]
        for inset in ax.child_axes:
            boxes.append((f"inset {_name(inset)}", inset.get_window_extent(renderer)))
    for what, text in texts:
        if text.get_visible() and text.get_text():
            boxes.append((what, text.get_window_extent(renderer)))
    return boxes


def _drawn_tick_labels(ax: Axes) -> list[Any]:
    """The tick labels inside the view (matplotlib keeps labels of ticks beyond it, not drawn)."""
    labels = []
    for axis in (ax.xaxis, ax.yaxis):
        low, high = sorted(axis.get_view_interval())
        slack = (high - low) * 1e-9
        for tick in axis.get_major_ticks():
            at = tick.get_loc()
            if at is not None and low - slack <= at <= high + slack:
                labels += [tick.label1, tick.label2]
    return labels


def _name(ax: Axes) -> str:
    return repr(ax.get_title().splitlines()[0] if ax.get_title() else ax.get_ylabel() or ax.get_label())


def _meets(box: Bbox, piece: Path | Bbox, clip: Bbox) -> bool:
    inside = Bbox.intersection(box, clip)
    if inside is None or inside.width <= 0 or inside.height <= 0:
        return False
    if isinstance(piece, Bbox):
        return inside.overlaps(piece)
    return piece.intersects_bbox(inside, filled=False)


def covered(fig: Figure) -> list[str]:
    """Every (label, data) pair of ``fig`` whose boxes meet, and every two labels that overlap; empty
    when nothing is drawn over anything."""
    renderer = drawn(fig)
    labels = labels_of(fig, renderer)
    found = []
    for ax in fig.axes:
        clip = ax.get_window_extent(renderer)
        for what, piece in data_of(ax):
            for label, box in labels:
                if label == f"inset {_name(ax)}" and ax in {child for a in fig.axes for child in a.child_axes}:
                    continue  # an inset's own data lies inside it
                if _meets(box, piece, clip):
                    found.append(f"{label} covers {what} of {_name(ax)}")
    for i, (first, a) in enumerate(labels):
        for second, b in labels[i + 1:]:
            if a.overlaps(b):
                found.append(f"{first} overlaps {second}")
    return found
