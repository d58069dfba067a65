"""The native module is compiled once: a second install (the README's second Quickstart
line) reuses the module in the package directory when it is newer than every source
under csrc/ and setup.py, and compiles (saying so) when any of them changed."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from types import ModuleType

import pytest
from setuptools import Distribution, Extension

ROOT = Path(__file__).resolve().parents[2]


def _load_setup() -> ModuleType:
    spec = importlib.util.spec_from_file_location("minitorch_accum_setup", ROOT / "setup.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # not __main__: defines the helpers, runs no setup()
    return module


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A project tree with csrc/, setup.py and a built module, all with controlled times."""
    setup = _load_setup()
    (tmp_path / "csrc" / "native").mkdir(parents=True)
    for name in ("csrc/accum_math.cuh", "csrc/native/module.cpp", "setup.py"):
        (tmp_path / name).write_text("// source\n")
        os.utime(tmp_path / name, (1_000, 1_000))
    (tmp_path / "minitorch_accum").mkdir()
    monkeypatch.setattr(setup, "ROOT", tmp_path)
    dist = Distribution({"name": "minitorch_accum", "ext_modules": [Extension("minitorch_accum._native", [])]})
    command = setup.BuildNativeOnce(dist)
    command.build_lib = str(tmp_path / "build-lib")
    command.ensure_finalized()
    compiled: list[str] = []
    monkeypatch.setattr(setup.build_ext, "build_extension", lambda self, ext: compiled.append(ext.name), raising=True)
    module = tmp_path / command.get_ext_filename("minitorch_accum._native")
    return setup, command, module, compiled


def test_an_up_to_date_module_is_reused_without_compiling(project, capsys):
    _, command, module, compiled = project
    module.write_bytes(b"built")
    os.utime(module, (2_000, 2_000))
    command.build_extension(command.extensions[0])
    assert compiled == []
    assert "up to date" in capsys.readouterr().out
    # the build directory gets the module, so an editable install copies it back unchanged
    target = Path(command.get_ext_fullpath("minitorch_accum._native"))
    assert target.read_bytes() == b"built" and target.stat().st_mtime == 2_000


@pytest.mark.parametrize("changed", ["csrc/accum_math.cuh", "csrc/native/module.cpp", "setup.py", None])
def test_a_changed_source_or_a_missing_module_compiles_and_says_so(project, capsys, changed):
    setup, command, module, compiled = project
    root = setup.ROOT
    if changed is None:
        assert not module.exists()
    else:
        module.write_bytes(b"built")
        os.utime(module, (2_000, 2_000))
        os.utime(root / changed, (3_000, 3_000))
    command.build_extension(command.extensions[0])
    assert compiled == ["minitorch_accum._native"]
    assert "minitorch_accum: compiling the native CPU kernels (about a minute)" in capsys.readouterr().out


def test_the_unity_build_includes_every_native_source_once_in_one_of_two_units(tmp_path):
    setup = _load_setup()
    sources = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "csrc" / "native").glob("*.cpp"))
    groups = setup.unity_groups(sources)
    assert set(groups) == {"emulator", "kernels"}
    assert sorted(groups["emulator"] + groups["kernels"]) == sources  # each file once, whatever files exist
    assert all(Path(f).name.startswith("emulat") for f in groups["emulator"])
    # the CUDA keyword shims of the emulator's unit stay out of the kernels' unit
    assert "csrc/native/emulator.cpp" in groups["emulator"] and "csrc/native/module.cpp" in groups["kernels"]
    written = setup.write_unity_sources(tmp_path, sources + ["csrc/native/new_file.cpp"])
    assert written == ["build/native_unity/native_emulator.cpp", "build/native_unity/native_kernels.cpp"]
    kernels_unit = tmp_path / written[1]
    assert '#include "native/new_file.cpp"\n' in kernels_unit.read_text()
    assert '#include "native/module.cpp"\n' in kernels_unit.read_text()
    os.utime(kernels_unit, (1_000, 1_000))
    setup.write_unity_sources(tmp_path, sources + ["csrc/native/new_file.cpp"])
    assert kernels_unit.stat().st_mtime == 1_000  # unchanged text: not rewritten
    setup.write_unity_sources(tmp_path, sources)
    assert "new_file" not in kernels_unit.read_text()


def test_the_native_module_was_built_where_a_compiler_is_present():
    # the extension is optional, so a compile error only warns (and pip hides it without -v): a
    # checkout with a C++ compiler must have the module, or every native test would skip silently
    import os
    import shutil

    from minitorch_accum import kernels

    if os.environ.get("MTA_ALLOW_NO_NATIVE") or not (shutil.which("c++") or shutil.which("g++")):
        pytest.skip("no C++ compiler here (or MTA_ALLOW_NO_NATIVE is set): the reference kernels serve")
    assert kernels.native_available(), (
        "a C++ compiler is present but minitorch_accum._native is missing: the build failed; "
        "`pip install -v -e .` (or `python setup.py build_ext --inplace`) shows the compiler's error")
