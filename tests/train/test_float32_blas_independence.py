"""A float32 training run gives the same parameters under either OpenBLAS kernel (the AMD machines'
Haswell and the Xeon's SkylakeX) and at 1 or 2 threads: its products run the native GEMM's one
summation order (csrc/native/sgemm_cpu.cpp), no longer OpenBLAS's (whose kernels round otherwise:
103929 of 105856 parameters differed after two epochs before). So does a NumPy without a bundled
OpenBLAS (a conda NumPy on MKL): the native GEMM needs no BLAS for float32."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from minitorch_accum.backend.blas import native_gemm

safetensors = pytest.importorskip("safetensors.numpy")
pytestmark = pytest.mark.skipif(native_gemm() is None, reason="needs the native module")


#: ``maccum`` in a process that finds no bundled OpenBLAS in NumPy (as on a NumPy built with MKL)
_WITHOUT_BUNDLED_OPENBLAS = ("import runpy, sys; import minitorch_accum.backend.blas as blas; "
                             "blas._numpy_openblas = lambda: None; sys.argv[0] = 'maccum'; "
                             "runpy.run_module('minitorch_accum.cli', run_name='__main__')")


def _train(directory: Path, threads: int, coretype: str | None) -> dict[str, np.ndarray]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("OPENBLAS_")}
    if coretype not in (None, "no bundled OpenBLAS"):
        env.update(OPENBLAS_CORETYPE=coretype, OPENBLAS_L2_SIZE="1048576")
    start = ["-c", _WITHOUT_BUNDLED_OPENBLAS] if coretype == "no bundled OpenBLAS" else ["-m", "minitorch_accum.cli"]
    command = [sys.executable, *start, "train", "--dataset", "chars", "--micro-batch", "16",
               "--accum", "4", "--epochs", "1", "--threads", str(threads), "--progress", "plain",
               "--checkpoint-every", "0", "--out", str(directory)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return safetensors.load_file(directory / "final.safetensors")


def test_a_float32_run_gives_the_same_parameters_under_either_blas_kernel_and_thread_count(tmp_path: Path) -> None:
    runs = {(threads, coretype): _train(tmp_path / f"{threads}-{coretype}", threads, coretype)
            for threads, coretype in ((1, None), (2, None), (1, "Haswell"), (2, "Haswell"),
                                      (2, "no bundled OpenBLAS"))}
    reference = runs[(1, None)]
    assert len(reference) > 20 and all(value.dtype == np.float32 for value in reference.values())
    for run, parameters in runs.items():
        assert parameters.keys() == reference.keys(), run
        for name, value in reference.items():
            assert parameters[name].tobytes() == value.tobytes(), (run, name)
