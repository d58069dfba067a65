"""Every list of kernels follows the catalog: what is generated from it is current, what is written by
hand (the native module's functions, the CUDA kernels and their comments, the faces and ``__all__``)
agrees with it, and each failure names what is missing or wrong and where."""

from __future__ import annotations

import ast
import inspect
import re

import pytest

import minitorch_accum.kernels as K
from minitorch_accum.kernels import accumulate, catalog, fused, norms, optimizer_steps, reference
from minitorch_accum.kernels.dispatch import native, native_available
from minitorch_accum.kernels.sources import csrc_dir, cuda_sources
from minitorch_accum.kernels.tools import stub
from minitorch_accum.kernels.tools.command import main

# where each family's typed face lives, and what else those modules export
FACE_MODULES = {
    catalog.ACCUMULATE: accumulate,
    catalog.L2_NORM: norms,
    catalog.SGD: optimizer_steps,
    catalog.ADAM: optimizer_steps,
    catalog.FUSED: fused,
}
NOT_KERNELS = {"new_flag", "GELU_FORMS"}


def _stub_functions() -> dict[str, list[str]]:
    """Each function of the stub on disk: its parameter names."""
    tree = ast.parse(stub.stub_path().read_text())
    return {f.name: [a.arg for a in f.args.args] for f in tree.body if isinstance(f, ast.FunctionDef)}


def _native_parameters(function: object) -> list[str]:
    """Parameter names from pybind11's signature line."""
    first = (function.__doc__ or "").splitlines()[0]
    inside = first[first.index("(") + 1 : first.rindex(") ->")]
    return [part.split(":")[0].strip() for part in re.split(r",\s*(?=\w+:)", inside) if part]


def _cuda_kernels() -> dict[str, str]:
    """Every CUDA kernel the .cu files register (their MTA_*_KERNELS lists), and its file."""
    found = {}
    for path in cuda_sources():
        for name in re.findall(r"X\((mta_\w+),", path.read_text()):
            found[name] = path.name
    return found


def test_the_stub_is_the_one_the_catalog_makes():
    diff = stub.differences()
    assert not diff, f"minitorch_accum/_native.pyi is out of date; run `{stub.STUB_COMMAND}`:\n{diff}"


def test_stub_command_checks_and_writes(tmp_path, monkeypatch, capsys):
    path = tmp_path / "_native.pyi"
    real = stub.stub_path().read_text()
    monkeypatch.setattr(stub, "stub_path", lambda: path)
    # a kernel edited by hand, and a line added to the hand-written part (which the command keeps)
    edited = real.replace(stub.KERNELS_RULE, f"{stub.KERNELS_RULE}\n\ndef add_scale(acc, g) -> None: ...")
    edited = edited.replace(stub.HELPERS_RULE, f"{stub.HELPERS_RULE}\n# kept")
    path.write_text(edited)
    assert main(["stub", "--check"]) == 1
    captured = capsys.readouterr()
    assert "-def add_scale(acc, g) -> None: ...\n" in captured.out and "# kept" not in captured.out
    assert f"is out of date; run `{stub.STUB_COMMAND}`" in captured.err
    assert main(["stub"]) == 0 and path.read_text() == stub.render() == real.replace(
        stub.HELPERS_RULE, f"{stub.HELPERS_RULE}\n# kept")
    assert main(["stub", "--check"]) == 0 and "is current" in capsys.readouterr().out
    path.write_text("def add_scale(acc, g) -> None: ...\n")  # the rules gone: said, nothing written
    assert main(["stub"]) == 2 and "lacks the rules the kernels stand between" in capsys.readouterr().err
    assert path.read_text() == "def add_scale(acc, g) -> None: ...\n"


@pytest.mark.skipif(not native_available(), reason="needs the native module")
def test_native_module_has_exactly_the_stubs_functions_and_parameters():
    module = native()
    exported = {name for name in dir(module) if not name.startswith("_") and callable(getattr(module, name))}
    declared = _stub_functions()
    assert not declared.keys() - exported, (
        f"the native module lacks {sorted(declared.keys() - exported)}: bind them in csrc/native "
        "(a kernel of the catalog, or a function of kernels/tools/stub.py)"
    )
    assert not exported - declared.keys(), (
        f"the native module has {sorted(exported - declared.keys())}, which neither the catalog nor "
        "kernels/tools/stub.py declares"
    )
    for name, parameters in declared.items():
        assert _native_parameters(getattr(module, name)) == parameters, (
            f"native {name}: py::arg names differ from the stub's {parameters}"
        )


def test_every_row_has_a_reference_with_its_signature():
    assert list(reference.REFERENCE) == list(catalog.KERNELS)
    for info in catalog.CATALOG:
        function = getattr(reference, info.name, None)
        assert function is reference.REFERENCE[info.name], f"reference.{info.name} is missing"
        if info.family != catalog.FUSED:
            assert f"{inspect.signature(function)}".replace("'", "") == info.signature, info.name
        else:
            assert not info.signature, f"{info.name}: a fused kernel's signature is its body's"


def test_every_row_has_a_face_exported_by_the_package():
    for info in catalog.CATALOG:
        assert info.family in catalog.FAMILIES, f"{info.name}: unknown family {info.family!r}"
        module = FACE_MODULES[info.family]
        face = getattr(module, info.name, None)
        assert callable(face), f"{info.name}: no face in {module.__name__} (write it there, typed)"
        assert info.name in module.__all__, f"{info.name} is not in {module.__name__}.__all__"
        assert info.name in K.__all__ and getattr(K, info.name) is face, (
            f"{info.name}: import it in minitorch_accum/kernels/__init__.py and add it to __all__"
        )
        native_parameters = list(inspect.signature(reference.REFERENCE[info.name]).parameters)
        face_parameters = list(inspect.signature(face).parameters)
        if info.family in (catalog.ACCUMULATE, catalog.L2_NORM):  # the face takes the native arguments
            assert face_parameters == native_parameters, info.name
        elif info.family in (catalog.SGD, catalog.ADAM):  # keyword hyperparameters for the scalars object
            assert face_parameters[: len(native_parameters) - 1] == native_parameters[:-1], info.name


def test_face_modules_hold_only_kernels_of_the_catalog():
    for module in set(FACE_MODULES.values()):
        families = {f for f, m in FACE_MODULES.items() if m is module}
        rows = {k.name for k in catalog.CATALOG if k.family in families}
        extra = set(module.__all__) - rows - NOT_KERNELS
        assert not extra, f"{module.__name__} exports {sorted(extra)}, which have no row in kernels/catalog.py"


def test_face_docstrings_state_the_tables_bytes():
    for info in catalog.CATALOG:
        doc = getattr(getattr(K, info.name, None), "__doc__", None) or ""  # a missing face: the test above
        figure = re.search(r"(\d+) B/elem", doc)
        if figure:
            assert int(figure.group(1)) == info.bytes_fp32, (
                f"kernels.{info.name}'s docstring says {figure.group(0)}, the catalog {info.bytes_fp32}"
            )


def test_every_cuda_kernel_belongs_to_one_row_in_its_source():
    kernels = _cuda_kernels()
    assert kernels, "no MTA_*_KERNELS list found in csrc/*.cu"
    owners: dict[str, list[str]] = {}
    for info in catalog.CATALOG:
        for stem in info.cuda:
            owners.setdefault(stem, []).append(info.name)
    assert all(len(rows) == 1 for rows in owners.values()), {s: r for s, r in owners.items() if len(r) > 1}
    for name, file in kernels.items():
        stem = catalog.cuda_stem(name)
        assert stem in owners, f"{file} registers {name}, but no row of the catalog lists {stem!r} in its cuda"
        assert catalog.source_of(name) == file, f"{name} is in {file}, its row says {catalog.source_of(name)}"
    stems = {catalog.cuda_stem(name) for name in kernels}
    for info in catalog.CATALOG:
        missing = [s for s in info.cuda if s not in stems]
        assert not missing, f"{info.name}: no kernel mta_{missing[0]}[_dtype] is registered in csrc/{info.source}"


def test_cuda_comments_state_the_tables_bytes():
    rows = {k.name: k for k in catalog.CATALOG}
    commented = set()
    for path in cuda_sources():
        lines = path.read_text().splitlines()
        for i, line in enumerate(lines):
            match = re.match(r"// (\w+)(?: pass \d+)?: ", line)
            if not match or match.group(1) not in rows:
                continue
            block = [line]
            for following in lines[i + 1 :]:
                if not following.startswith("//"):
                    break
                block.append(following)
            info = rows[match.group(1)]
            commented.add(info.name)
            figure = re.search(r"(\d+) B/elem", "\n".join(block))
            if figure:
                assert int(figure.group(1)) == info.bytes_fp32, (
                    f"{path.name}:{i + 1}: the comment of {info.name} says {figure.group(0)}, "
                    f"the catalog {info.bytes_fp32}"
                )
    for info in catalog.CATALOG:
        if info.name in info.cuda:
            assert info.name in commented, f"csrc/{info.source} has no comment '// {info.name}: ...' over its kernels"


def test_every_source_a_row_names_exists():
    for info in catalog.CATALOG:
        assert (csrc_dir() / info.source).is_file(), f"{info.name}: no csrc/{info.source}"
