"""The figure of ``maccum precision``: relative error against k on log-log axes, one line per
way of accumulating, with the sqrt(k) * eps and k * eps guide lines of each buffer dtype, each
dtype's eps named in the right margin at the end of its guide (off the lines), and the
stochastically rounded row's expected error (its guide: it grows like sqrt(k) units)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from minitorch_accum.observe.precision import INPUT_ROUNDING, STOCHASTIC, PrecisionStudy

__all__ = ["precision_figure", "save_precision_figure"]

_STYLE = {"bfloat16": "tab:red", "float32": "tab:blue", "float64": "tab:green"}


def precision_figure(study: PrecisionStudy) -> Any:
    """A matplotlib Figure of ``study`` (errors of 0, exact sums, have no place on a log axis)."""
    from matplotlib.figure import Figure  # no pyplot: no backend switch in the caller's process

    fig = Figure(figsize=(8.4, 6.6))
    ax = fig.subplots()
    ks = np.array(study.ks, dtype=float)
    markers = iter("oPs^vDx")
    for row in study.rows:
        errors = np.array([row.errors[k] for k in study.ks])
        shown = errors > 0
        if row.name == INPUT_ROUNDING:
            ax.plot(ks[shown], errors[shown], color="0.5", linestyle="-.", linewidth=1,
                    label=f"{row.name} (before any sum)")
            continue
        color = "tab:purple" if "compensated" in row.name else _STYLE[row.buffer_dtype]
        color = "tab:orange" if row.name == STOCHASTIC else color
        linestyle = "--" if row.gradient_dtype != row.buffer_dtype else "-"
        ax.plot(ks[shown], errors[shown], marker=next(markers), color=color, linestyle=linestyle, linewidth=1.6,
                markersize=4, label=row.name)
        if row.expected:
            expected = np.array([row.expected[k] for k in study.ks])
            # a wide pale band under the row: where the row runs inside it, it errs as expected
            ax.plot(ks[expected > 0], expected[expected > 0], color=color, linestyle="-", linewidth=7, alpha=0.25,
                    label="its expected error, √Σ(x−lo)(hi−x): ~√k units")
    worst, random = (0, (6, 3)), ":"
    for dtype in ("bfloat16", "float32", "float64"):
        eps = next(r.eps for r in study.rows if r.buffer_dtype == dtype)
        ax.plot(ks, ks * eps, color=_STYLE[dtype], linestyle=worst, linewidth=0.8, alpha=0.7)
        ax.plot(ks, np.sqrt(ks) * eps, color=_STYLE[dtype], linestyle=random, linewidth=0.9, alpha=0.8)
        # in the margin, level with the end of its k·eps guide: nothing is drawn there to run through it
        ax.annotate(f"eps({dtype})\n= {eps:.1e}", (1.0, ks[-1] * eps), xycoords=("axes fraction", "data"),
                    xytext=(4, 0), textcoords="offset points", fontsize=7, color=_STYLE[dtype], ha="left",
                    va="center", annotation_clip=False)
    ax.plot([], [], color="0.4", linestyle=worst, linewidth=0.8, label="k·eps of the buffer (worst case)")
    ax.plot([], [], color="0.4", linestyle=random, linewidth=0.9, label="√k·eps of the buffer (random rounding)")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("k (micro-batches accumulated)")
    ax.set_ylabel("||accumulated - exact|| / ||exact||")
    about = study.about
    ax.set_title(f"accumulation error against k ({about.get('model', 'planted gradients')}, "
                 f"micro-batches of {about.get('micro_batch', '-')})", fontsize=10)
    # under the axes: with the stochastic row and its band the legend no longer fits an empty corner
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=3)
    ax.grid(True, which="major", alpha=0.3)
    fig.tight_layout()
    return fig


def save_precision_figure(study: PrecisionStudy, path: str | os.PathLike) -> Path:
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    precision_figure(study).savefig(target, dpi=110)
    return target
