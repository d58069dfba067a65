"""The catalog is the one table of bytes per element, for kernels and window passes alike;
the kernels package keeps to its layer; its command line runs as a module."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import minitorch_accum.kernels as K
from minitorch_accum.kernels import catalog, modes

KERNELS_DIR = Path(K.__file__).resolve().parent


def test_bytes_moved_counts_reads_and_writes_for_any_dtypes():
    n = 1000
    # (name, acc itemsize, grad itemsize) -> bytes per element, counted by hand
    expected = {
        ("add_scale", 4, 4): 12,  # acc read + write, g read
        ("add_scale", 8, 4): 20,  # fp32 g into an fp64 accumulator
        ("add_scale", 8, 8): 24,
        ("copy_scale", 4, 4): 8,  # acc written only
        ("cast_add_scale", 4, 2): 10,
        ("cast_copy_scale", 4, 2): 6,
        ("add_scale_compensated", 4, 4): 20,  # acc and comp read + write
        ("copy_scale_compensated", 4, 4): 12,
        ("multi_add_scale", 4, 2): 10,
        ("container-store", 4, 4): 0,
        ("container-add", 4, 4): 12,
        ("scale", 4, 4): 8,
        ("scale", 8, 4): 16,
        ("fold_compensation", 4, 4): 12,  # acc read + write, comp read
        ("finite_check", 4, 4): 4,
        ("l2_norm", 2, 2): 2,
        ("sgd_momentum_step", 4, 4): 20,
        ("adamw_step", 8, 8): 56,
        # the CUDA kernels by their names, dtypes included
        ("mta_cast_add_scale_f32_bf16", 4, 2): 10,
        ("mta_copy_scale_f64_f32", 8, 4): 12,
        ("mta_multi_add_scale_compensated", 4, 4): 20,
        ("mta_adamw_step_f32", 4, 4): 28,
    }
    for (name, acc_itemsize, grad_itemsize), per_element in expected.items():
        assert catalog.bytes_moved(name, n, acc_itemsize, grad_itemsize) == per_element * n, name
    assert K.bytes_moved is catalog.bytes_moved
    with pytest.raises(KeyError, match="unknown kernel or pass 'allreduce'"):
        catalog.bytes_moved("allreduce", n, 4, 4)


def test_fp32_figures_of_the_table_follow_from_its_counts():
    for info in catalog.CATALOG + catalog.WINDOW_PASSES:
        assert info.bytes_fp32 == catalog.bytes_moved(info.name, 1, info.acc_itemsize, info.fp32_grad_itemsize)
        # only the kernels that write nothing but bfloat16 state their figure for a bf16 acc
        assert (info.acc_itemsize == 2) == (info.mode is not None and modes.is_stochastic(info.mode)), info.name
    figures = {k.name: k.bytes_fp32 for k in catalog.CATALOG}
    assert figures["add_scale"] == 12 and figures["cast_add_scale"] == 10 and figures["adamw_step"] == 28
    # into a bf16 arena: 2 + 2 + 4 (fp32 g), 2 + 2 + 2 (16-bit g), 2 + 4 (the first write)
    assert figures["add_scale_stochastic"] == 8 and figures["cast_add_scale_stochastic"] == 6
    assert figures["copy_scale_stochastic"] == 6 and figures["multi_add_scale_stochastic"] == 8
    assert catalog.bytes_moved("mta_add_scale_bf16_f32", 1, 2, 4) == 8  # rounded to nearest: the same bytes
    assert [k.name for k in catalog.CATALOG] == list(K.KERNELS)


def test_kernels_package_imports_nothing_else_of_the_package():
    for path in sorted(KERNELS_DIR.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            for name in names:
                if name.startswith("minitorch_accum") and name != "minitorch_accum":
                    assert name.startswith("minitorch_accum.kernels") or name == "minitorch_accum._native", (
                        f"{path.relative_to(KERNELS_DIR)} imports {name}"
                    )
                if name == "minitorch_accum":  # from minitorch_accum import X
                    assert all(alias.name == "_native" for alias in node.names), path


def test_the_command_runs_as_a_module():
    root = KERNELS_DIR.parent.parent
    listed = subprocess.run(
        [sys.executable, "-m", "minitorch_accum.kernels", "list"], capture_output=True, text=True, cwd=root
    )
    assert listed.returncode == 0 and "add_scale" in listed.stdout, listed.stderr
    refused = subprocess.run(
        [sys.executable, "-m", "minitorch_accum.kernels", "compile", "--arch", "banana"],
        capture_output=True,
        text=True,
        cwd=root,
    )
    assert refused.returncode == 2 and "'banana' is not a GPU architecture" in refused.stderr
