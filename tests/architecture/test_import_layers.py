"""The layer order of docs/design.md is a rule: a module imports only modules of its own floor
or of floors below (read from the code's own import statements, every file of the package)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "minitorch_accum"
DESIGN = ROOT / "docs" / "design.md"
FACE = "(package face)"


def floors() -> dict[str, int]:
    """Room -> floor from the diagram under '## Layers' in docs/design.md: each line of its code
    block is one floor (the top first), its rooms separated by ' / ' before two spaces of text."""
    block = DESIGN.read_text(encoding="utf-8").split("## Layers", 1)[1].split("```", 2)[1]
    lines = [line.strip() for line in block.splitlines() if line.strip()]
    return {room.strip(): level for level, line in enumerate(reversed(lines))
            for room in re.split(r"\s{2,}", line)[0].split(" / ")}


def _is_module(name: str) -> bool:
    return (PACKAGE / name).is_dir() or (PACKAGE / f"{name}.py").exists() or name == "_native"


def room_of(module: str) -> str | None:
    """The room of a dotted module: its first component under minitorch_accum (``_native`` is the
    kernels' compiled module), the package's face for the root itself, None outside the package."""
    parts = module.split(".")
    if parts[0] != "minitorch_accum":
        return None
    if len(parts) == 1:
        return FACE
    return "kernels" if parts[1] == "_native" else parts[1]


def imports_in(source: str, module: str, is_package: bool) -> list[tuple[int, str]]:
    """(line, module) of every import in ``source`` (the text of ``module``), relative imports
    resolved; ``from minitorch_accum import kernels`` is an import of minitorch_accum.kernels,
    ``from minitorch_accum import tensor`` one of the package's face."""
    anchor = module.split(".") if is_package else module.split(".")[:-1]
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join([*anchor[: len(anchor) - node.level + 1], *([base] if base else [])])
            if base != "minitorch_accum":
                found.append((node.lineno, base))
                continue
            for alias in node.names:
                found.append((node.lineno, f"minitorch_accum.{alias.name}" if _is_module(alias.name)
                              else "minitorch_accum"))
    return found


def upward_imports(files: dict[str, str]) -> list[str]:
    """Every import (in ``files``: module name -> source) of a room on a higher floor."""
    level = floors()
    found = []
    for module, source in files.items():
        is_package = module.endswith(".__init__")
        name = module.removesuffix(".__init__")
        room = FACE if name == "minitorch_accum" else room_of(name)
        for line, target_module in imports_in(source, name, is_package):
            target = room_of(target_module)
            if target is not None and target != room and level[target] > level[room]:
                found.append(f"{module}:{line} ({room}, floor {level[room]}) imports {target_module} "
                             f"({target}, floor {level[target]})")
    return found


def package_files() -> dict[str, str]:
    return {".".join(p.relative_to(ROOT).with_suffix("").parts): p.read_text(encoding="utf-8")
            for p in sorted(PACKAGE.rglob("*.py"))}


def test_the_diagram_names_every_room_of_the_package() -> None:
    rooms = set(floors())
    present = {p.name.removesuffix(".py") for p in PACKAGE.iterdir()
               if (p.is_dir() and (p / "__init__.py").exists()) or (p.suffix == ".py" and p.name != "__init__.py")}
    assert present - rooms == set(), "rooms missing from docs/design.md's diagram"
    assert rooms - present - {FACE} == set(), "the diagram names rooms that do not exist"


def test_no_module_imports_a_higher_floor() -> None:
    assert upward_imports(package_files()) == []


@pytest.mark.parametrize("source", ["from minitorch_accum.train import Learner", "import minitorch_accum.cli.main",
                                    "from minitorch_accum import train", "from ..train.learner import Learner",
                                    "def f():\n    from minitorch_accum.accum import Accumulator\n"])
def test_an_upward_import_is_reported(source: str) -> None:
    found = upward_imports({"minitorch_accum.kernels.probe": source})
    assert len(found) == 1 and found[0].startswith("minitorch_accum.kernels.probe:")


def test_imports_of_the_same_or_a_lower_floor_pass() -> None:
    assert upward_imports({"minitorch_accum.train.probe": "from minitorch_accum.accum import Accumulator\n"
                                                          "from . import settings\nimport numpy\n"}) == []
