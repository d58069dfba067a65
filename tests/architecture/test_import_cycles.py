"""No two files of the package import each other, directly or round a loop (TYPE_CHECKING imports
included: a type that must be imported lazily is a circle still). An import of a name from a
package's face counts as an import of the file that defines it, as ``farm-studio look`` reads it;
the faces themselves only hand names on."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "minitorch_accum"


def package_sources() -> dict[str, str]:
    """Dotted module name (``minitorch_accum.train.__init__`` for a package's face) -> its source."""
    return {".".join(p.relative_to(ROOT).with_suffix("").parts): p.read_text(encoding="utf-8")
            for p in sorted(PACKAGE.rglob("*.py"))}


def import_graph(sources: dict[str, str]) -> dict[str, set[str]]:
    """Module -> the modules of ``sources`` it imports (names taken from a face resolved to their file)."""
    trees = {name: ast.parse(source) for name, source in sources.items()}

    def file_of(module: str) -> str | None:
        return module if module in sources else f"{module}.__init__" if f"{module}.__init__" in sources else None

    def handed_on(package: str, name: str, depth: int = 0) -> str | None:
        """The file a package's face takes ``name`` from (following faces that take it from faces)."""
        for node in ast.walk(trees.get(f"{package}.__init__", ast.Module(body=[], type_ignores=[]))):
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for alias in node.names:
                    if (alias.asname or alias.name) == name:
                        found = file_of(f"{node.module}.{alias.name}")
                        if found is None and depth < 8 and f"{node.module}.__init__" in sources:
                            found = handed_on(node.module, alias.name, depth + 1)
                        return found or file_of(node.module)
        return None

    graph: dict[str, set[str]] = {}
    for name, tree in trees.items():
        if name.endswith(".__init__"):
            continue  # a face only hands names on
        anchor = name.split(".")[:-1]
        targets: set[str | None] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets.update(file_of(alias.name) for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join([*anchor[: len(anchor) - node.level + 1], *([base] if base else [])])
                for alias in node.names:
                    targets.add(file_of(f"{base}.{alias.name}") or handed_on(base, alias.name) or file_of(base))
        graph[name] = {t for t in targets if t is not None and t != name and not t.endswith(".__init__")}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Each set of modules that import each other round a loop (Tarjan's strongly connected
    components, without recursion), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


def test_no_files_of_the_package_import_each_other() -> None:
    assert circles(import_graph(package_sources())) == []


def test_a_circle_is_found_through_a_face_and_a_type_checking_import() -> None:
    sources = {
        "minitorch_accum.train.__init__": "from minitorch_accum.train.learner import Learner\n",
        "minitorch_accum.train.learner": "from minitorch_accum.train.resume import Checkpoints\n",
        "minitorch_accum.train.resume": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                        "    from minitorch_accum.train import Learner\n",
        "minitorch_accum.train.metrics": "from minitorch_accum.train.learner import Learner\n",
    }
    assert circles(import_graph(sources)) == [["minitorch_accum.train.learner", "minitorch_accum.train.resume"]]


def test_imports_down_a_chain_are_no_circle() -> None:
    sources = {"minitorch_accum.a": "from minitorch_accum import b\n",
               "minitorch_accum.b": "import minitorch_accum.c\n", "minitorch_accum.c": "import numpy\n"}
    assert circles(import_graph(sources)) == []
