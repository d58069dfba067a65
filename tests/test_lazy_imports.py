"""Importing a low layer loads that layer and what it needs, not the autograd above it, while
every name of the package still resolves (each on first use) to the same object as before."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import minitorch_accum as mta
from minitorch_accum import autodiff, backend, ops

_HOME = str(Path(mta.__file__).resolve().parent.parent)  # run the copy of the package under test


def _loaded_by(statement: str) -> set[str]:
    """The minitorch_accum modules a fresh interpreter holds after ``statement``."""
    code = f"import sys\n{statement}\nprint(*sorted(m for m in sys.modules if m.startswith('minitorch_accum')))"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([_HOME, os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    return set(result.stdout.split())


@pytest.mark.parametrize(("statement", "layer", "above"), [
    ("import minitorch_accum.kernels", "kernels", {"backend", "ops", "autodiff", "nn"}),
    ("import minitorch_accum.backend", "backend", {"ops", "autodiff", "nn"}),
    ("from minitorch_accum import float32, manual_seed", "backend", {"ops", "autodiff", "nn"}),
    # the pytest plugin loads with every pytest run of a venv holding the package: the library waits
    ("import minitorch_accum.testing.pytest_plugin", "testing", {"kernels", "backend", "ops", "autodiff", "nn",
                                                                 "observe", "accum", "distributed"}),
])
def test_importing_a_layer_loads_nothing_above_it(statement: str, layer: str, above: set[str]) -> None:
    loaded = _loaded_by(statement)
    assert f"minitorch_accum.{layer}" in loaded
    assert {m.split(".")[1] for m in loaded if "." in m} & above == set()


def test_a_tensor_name_loads_autodiff_on_first_use() -> None:
    loaded = _loaded_by("import minitorch_accum as mta\n"
                        "assert 'minitorch_accum.autodiff' not in sys.modules\n"
                        "mta.tensor")
    assert "minitorch_accum.autodiff" in loaded


def test_every_name_is_the_object_of_the_package_that_lends_it() -> None:
    engine = {"LeafSink", "apply", "run_backward"}
    assert mta.__all__[:len(autodiff.__all__) - len(engine)] == [n for n in autodiff.__all__ if n not in engine]
    for name in mta.__all__:
        value = getattr(mta, name)
        if name in autodiff.__all__:
            assert value is getattr(autodiff, name), name
    assert mta.float32 is backend.float32 and mta.Device is backend.Device and mta.OpError is ops.OpError
    assert mta.bool is backend.bool_ and mta.bool_ is backend.bool_ and mta.long is backend.int64
    assert mta.autodiff is autodiff and mta.ops is ops
    for name in engine:
        assert not hasattr(mta, name), name
    with pytest.raises(AttributeError, match="has no attribute 'no_such_name'"):
        _ = mta.no_such_name


def test_star_import_gives_the_whole_public_list() -> None:
    namespace: dict[str, object] = {}
    exec("from minitorch_accum import *", namespace)
    assert sorted(n for n in namespace if n != "__builtins__") == sorted(mta.__all__)
    assert set(dir(mta)) >= set(mta.__all__)
