"""The native module's stub, minitorch_accum/_native.pyi, generated from the catalog.

Its kernels are the catalog's rows in order, each with the signature its reference has (the
native module's: the row's, or for a fused kernel its body's in ``fused_reference``) and what
it computes; the module's other functions (threads, environment, layout, launch emulator,
memory counter) and the header are written by hand in the stub itself, above ``KERNELS_RULE``
and from ``HELPERS_RULE`` on, and kept as they are: only the kernels between the two rules are
generated. ``python -m minitorch_accum.kernels stub`` writes it, ``... stub --check`` says
whether it is current; a test compares it with ``render()`` and the native module's functions
with its.
"""

from __future__ import annotations

import difflib
import inspect
import textwrap
from pathlib import Path

from minitorch_accum.kernels import reference
from minitorch_accum.kernels.catalog import CATALOG

__all__ = ["LINE_LENGTH", "STUB_COMMAND", "differences", "render", "stub_path", "write"]

LINE_LENGTH = 120  # ruff's, for the repository
STUB_COMMAND = "python -m minitorch_accum.kernels stub"

# the stub's two hand-written parts stand around the generated kernels: the header down to the
# first rule, the module's other functions from the second
KERNELS_RULE = "# ---------------------------------------------------------------- the kernels (catalog.py)"
HELPERS_RULE = "# ---------------------------------------------------------------- the module's other functions"


def stub_path() -> Path:
    """minitorch_accum/_native.pyi, beside the native module."""
    return Path(__file__).resolve().parents[2] / "_native.pyi"


def _parameter(p: inspect.Parameter) -> str:
    text = p.name if p.annotation is inspect.Parameter.empty else f"{p.name}: {p.annotation}"
    return text if p.default is inspect.Parameter.empty else f"{text} = {p.default!r}"


def _definition(name: str, signature: inspect.Signature) -> str:
    """``def name(...) -> result:`` on one line, or wrapped as ruff format wraps it."""
    parameters = [_parameter(p) for p in signature.parameters.values()]
    result = f" -> {signature.return_annotation}" if signature.return_annotation is not inspect.Signature.empty else ""
    one_line = f"def {name}({', '.join(parameters)}){result}:"
    if len(one_line) <= LINE_LENGTH:
        return one_line
    inside = "    " + ", ".join(parameters)
    if len(inside) <= LINE_LENGTH:
        return f"def {name}(\n{inside}\n){result}:"
    return f"def {name}(\n" + "".join(f"    {p},\n" for p in parameters) + f"){result}:"


def _hand_written(current: str) -> tuple[str, str]:
    """The stub's header (through ``KERNELS_RULE``) and its other functions (from ``HELPERS_RULE``)."""
    start, end = current.find(KERNELS_RULE), current.find(HELPERS_RULE)
    if start < 0 or end < start:
        raise ValueError(f"{stub_path()} lacks the rules the kernels stand between ({KERNELS_RULE!r}, then "
                         f"{HELPERS_RULE!r}): restore them (git checkout the file) and run `{STUB_COMMAND}`")
    return current[:start + len(KERNELS_RULE)], current[end:]


def render(current: str | None = None) -> str:
    """The text the stub must hold: ``current`` (the stub on disk by default) with its kernels
    generated from the catalog."""
    header, helpers = _hand_written(stub_path().read_text() if current is None else current)
    kernels = []
    for info in CATALOG:
        definition = _definition(info.name, inspect.signature(reference.REFERENCE[info.name]))
        note = f"; {info.note}" if info.note else ""
        # the indent and the closing quotes take 7 characters
        figure = f"{info.bytes_fp32} B/elem {info.figure_dtypes}"
        lines = textwrap.wrap(f'"""{info.computes} ({figure}{note}).', LINE_LENGTH - 7)
        docstring = "\n    ".join(lines) + ('"""' if len(lines) == 1 else '\n    """')
        kernels.append(f"{definition}\n    {docstring}\n")
    return f"{header}\n\n" + "\n".join(kernels) + "\n" + helpers


def differences(path: Path | None = None) -> str:
    """A unified diff from the stub on disk to ``render()``; empty when it is current."""
    path = path or stub_path()
    current = path.read_text() if path.is_file() else ""
    old, new = current.splitlines(keepends=True), render(current).splitlines(keepends=True)
    return "".join(difflib.unified_diff(old, new, str(path), f"{STUB_COMMAND} would write"))


def write(path: Path | None = None) -> bool:
    """Write the stub; whether it changed."""
    path = path or stub_path()
    current = path.read_text() if path.is_file() else ""
    text = render(current)
    if current == text:
        return False
    path.write_text(text)
    return True
