"""The numerics fingerprint: what it reads of this process, its record, and which differences count
(the BLAS kernel and NumPy's SIMD target do; threads, versions and the kernel path do not)."""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import subprocess
import sys

import pytest

from minitorch_accum.backend.blas import FIXED_ORDER
from minitorch_accum.backend.numerics import (
    UNRECORDED,
    BlasLibrary,
    NumericsFingerprint,
    numerics_differences,
    numerics_fingerprint,
)

SKYLAKE = NumericsFingerprint(
    blas=(BlasLibrary("numpy", "openblas", "0.3.31", "SkylakeX", 2), BlasLibrary("scipy", "openblas", "0.3.30",
                                                                             "SkylakeX", 2)),
    numpy="2.4.6", scipy="1.17.1", numpy_simd="AVX512_SPR", kernel_path="native", native_threads=2)


def _kernel(fingerprint: NumericsFingerprint, kernel: str) -> NumericsFingerprint:
    return dataclasses.replace(fingerprint, blas=tuple(dataclasses.replace(b, kernel=kernel) for b in fingerprint.blas))


def test_this_process_is_described_and_its_record_comes_back_from_json() -> None:
    import numpy as np
    import scipy

    here = numerics_fingerprint()
    assert here.numpy == np.__version__ and here.scipy == scipy.__version__
    assert {library.owner for library in here.blas} >= {"numpy", "scipy"}  # SciPy's BLAS is loaded for the record
    assert here.kernel_path in ("native", "reference", "emulated")
    back = NumericsFingerprint.from_dict(json.loads(json.dumps(here.as_dict())))
    assert back == here
    line = here.describe()
    assert "\n" not in line and f"NumPy {np.__version__} (SIMD {here.numpy_simd})" in line
    for library in here.blas:
        assert f"{library.owner}'s " in line and (library.kernel or library.version) in line


def test_threads_versions_and_the_kernel_path_are_no_difference() -> None:
    # measured (backend/numerics.py): none of these changes a run's bits, so none may raise the alarm
    other = dataclasses.replace(SKYLAKE, numpy="2.2.6", scipy="1.16.0", kernel_path="reference", native_threads=1,
                                blas=tuple(dataclasses.replace(b, threads=1, version="0.3.29") for b in SKYLAKE.blas))
    assert numerics_differences([SKYLAKE, other]) == {}
    assert numerics_differences([SKYLAKE, SKYLAKE, SKYLAKE]) == {}


def test_another_blas_kernel_or_numpy_simd_target_is_named_in_words() -> None:
    haswell = _kernel(SKYLAKE, "Haswell")
    assert numerics_differences([haswell, SKYLAKE]) == {"BLAS": ["OpenBLAS Haswell", "OpenBLAS SkylakeX"]}
    lower = dataclasses.replace(SKYLAKE, numpy_simd="X86_V3")
    assert numerics_differences([SKYLAKE, lower, haswell]) == {
        "BLAS": ["OpenBLAS SkylakeX", "OpenBLAS SkylakeX", "OpenBLAS Haswell"],
        "NumPy SIMD": ["AVX512_SPR", "X86_V3", "AVX512_SPR"]}
    # NumPy's and SciPy's libraries on different kernels: each is named with its owner
    mixed = dataclasses.replace(SKYLAKE, blas=(SKYLAKE.blas[0], dataclasses.replace(SKYLAKE.blas[1], kernel="Haswell")))
    assert numerics_differences([SKYLAKE, mixed])["BLAS"][1] == "OpenBLAS SkylakeX (numpy), OpenBLAS Haswell (scipy)"
    mkl = dataclasses.replace(SKYLAKE, blas=(BlasLibrary("numpy", "mkl", "2024.1", None, 2),))
    assert numerics_differences([SKYLAKE, mkl])["BLAS"] == ["OpenBLAS SkylakeX", "MKL 2024.1"]


@pytest.mark.parametrize(("change", "named"), [
    (lambda r: r.pop("numpy_simd"), "lacks 'numpy_simd'"),
    (lambda r: r.__setitem__("blas", "openblas"), "'blas' is 'openblas', not list"),
    (lambda r: r["blas"][1].__setitem__("kernel", 5), "'blas[1].kernel' is 5, not str"),
    (lambda r: r["blas"][0].pop("threads"), "lacks 'blas[0].threads'"),
    (lambda r: r["blas"].__setitem__(0, 7), "blas[0] is 7, not an object"),
    (lambda r: r.__setitem__("native_threads", "2"), "'native_threads' is '2', not int"),
    (lambda r: r.__setitem__("float32_gemm", 5), "'float32_gemm' is 5, not str"),
    (lambda r: r["blas"][0].__setitem__("owner", None), "'blas[0].owner' is None, not str"),
    (lambda r: r["blas"][1].pop("library"), "lacks 'blas[1].library'"),
    (lambda r: r["blas"][0].__setitem__("version", 3.0), "'blas[0].version' is 3.0, not str"),
])
def test_a_damaged_record_is_refused_naming_the_field(change: object, named: str) -> None:
    record = SKYLAKE.as_dict()
    change(record)
    with pytest.raises(ValueError, match="numerics fingerprint") as refused:
        NumericsFingerprint.from_dict(record)
    assert named in str(refused.value)


def _fingerprint_in_a_child(**environment: str) -> NumericsFingerprint:
    env = {name: value for name, value in os.environ.items() if name not in ("OPENBLAS_CORETYPE",
                                                                                  "NPY_DISABLE_CPU_FEATURES")}
    code = ("import json; from minitorch_accum.backend.numerics import numerics_fingerprint; "
            "print(json.dumps(numerics_fingerprint().as_dict()))")
    done = subprocess.run([sys.executable, "-c", code], env={**env, **environment}, capture_output=True, text=True,
                          timeout=120, check=True)
    return NumericsFingerprint.from_dict(json.loads(done.stdout))


@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"), reason="OpenBLAS's x86 core types")
def test_openblas_coretype_and_numpy_cpu_features_show_in_the_fingerprint() -> None:
    import numpy as np

    if np.show_config(mode="dicts")["Build Dependencies"]["blas"]["name"] != "scipy-openblas":
        pytest.skip("NumPy here is not built with its bundled OpenBLAS")
    sandybridge = _fingerprint_in_a_child(OPENBLAS_CORETYPE="Sandybridge")
    haswell = _fingerprint_in_a_child(OPENBLAS_CORETYPE="Haswell")
    assert {library.kernel for library in haswell.blas} == {"Haswell"}
    assert numerics_differences([sandybridge, haswell]) == {"BLAS": ["OpenBLAS Sandybridge", "OpenBLAS Haswell"]}
    from numpy._core import _multiarray_umath as umath

    dispatched = [target for target in umath.__cpu_dispatch__ if umath.__cpu_features__.get(target)]
    if not dispatched:
        pytest.skip("this CPU has none of NumPy's dispatch targets")
    lowered = _fingerprint_in_a_child(OPENBLAS_CORETYPE="Haswell", NPY_DISABLE_CPU_FEATURES=",".join(dispatched))
    assert lowered.numpy_simd.startswith("baseline")
    assert numerics_differences([haswell, lowered]) == {"NumPy SIMD": [dispatched[-1], lowered.numpy_simd]}


def test_who_rounds_float32_products_is_recorded_and_read_back() -> None:
    here = numerics_fingerprint()
    assert here.float32_gemm == FIXED_ORDER  # the native module is here, MTA_GEMM unset
    assert f"float32 GEMM {FIXED_ORDER};" in here.describe()
    assert NumericsFingerprint.from_dict(here.as_dict()).float32_gemm == FIXED_ORDER
    old = here.as_dict()
    del old["float32_gemm"]  # a checkpoint written before the field was kept
    assert NumericsFingerprint.from_dict(old).float32_gemm is None
    assert f"float32 GEMM {UNRECORDED};" in NumericsFingerprint.from_dict(old).describe()


FIXED = dataclasses.replace(SKYLAKE, float32_gemm=FIXED_ORDER)
HASWELL_FIXED = _kernel(FIXED, "Haswell")


def test_a_blas_kernel_that_rounds_none_of_a_float32_runs_products_is_no_difference() -> None:
    import ml_dtypes
    import numpy as np

    float32 = [np.dtype(np.float32)]
    assert numerics_differences([HASWELL_FIXED, FIXED], float32) == {}
    assert numerics_differences([HASWELL_FIXED, FIXED], [np.float32, np.float32]) == {}
    # 16-bit products are NumPy's own loops, not the BLAS's
    assert numerics_differences([HASWELL_FIXED, FIXED], [np.dtype(ml_dtypes.bfloat16), np.float16]) == {}
    # NumPy's SIMD target still counts for them
    lower = dataclasses.replace(HASWELL_FIXED, numpy_simd="X86_V3")
    assert numerics_differences([lower, FIXED], float32) == {"NumPy SIMD": ["X86_V3", "AVX512_SPR"]}


def test_the_blas_counts_where_it_rounds_a_product_of_the_run() -> None:
    import numpy as np

    blas = {"BLAS": ["OpenBLAS Haswell", "OpenBLAS SkylakeX"]}
    # float64 products are the BLAS's, whatever float32's route
    assert numerics_differences([HASWELL_FIXED, FIXED], [np.float64]) == blas
    assert numerics_differences([HASWELL_FIXED, FIXED], [np.float32, np.float64]) == blas
    # dtypes not told: every field
    assert numerics_differences([HASWELL_FIXED, FIXED]) == blas
    # one process hands float32 to the BLAS: the route differs and the BLAS counts
    scipy_route = dataclasses.replace(HASWELL_FIXED, float32_gemm="BLAS (MTA_GEMM=scipy)")
    assert numerics_differences([scipy_route, FIXED], [np.float32]) == {
        **blas, "float32 GEMM": ["BLAS (MTA_GEMM=scipy)", FIXED_ORDER]}
    # ... even on one kernel, where only the route differs
    assert numerics_differences([_kernel(scipy_route, "SkylakeX"), FIXED], [np.float32]) == {
        "float32 GEMM": ["BLAS (MTA_GEMM=scipy)", FIXED_ORDER]}
    # a float64 run does not care who would round float32 products
    assert numerics_differences([_kernel(scipy_route, "SkylakeX"), FIXED], [np.float64]) == {}
    # a record of before the field: float32 products were the BLAS's then
    old = dataclasses.replace(HASWELL_FIXED, float32_gemm=None)
    assert numerics_differences([old, FIXED], [np.float32]) == {**blas, "float32 GEMM": [UNRECORDED, FIXED_ORDER]}


def test_a_fingerprint_is_described_field_by_field() -> None:
    two = dataclasses.replace(FIXED, native_threads=2)
    assert two.describe() == (
        "BLAS numpy's OpenBLAS 0.3.31 SkylakeX (2 threads), scipy's OpenBLAS 0.3.30 SkylakeX (2 threads); "
        f"float32 GEMM {FIXED_ORDER}; NumPy 2.4.6 (SIMD AVX512_SPR); SciPy 1.17.1; kernels native (2 threads)")
    bare = dataclasses.replace(SKYLAKE, blas=(), scipy=None, native_threads=None, kernel_path="reference")
    assert bare.describe() == (f"BLAS none loaded; float32 GEMM {UNRECORDED}; NumPy 2.4.6 (SIMD AVX512_SPR); "
                               "SciPy not installed; kernels reference")
    assert bare.compared() == {"BLAS": "none loaded", "float32 GEMM": UNRECORDED, "NumPy SIMD": "AVX512_SPR"}


def test_a_record_that_is_not_an_object_is_refused_naming_what_it_is() -> None:
    with pytest.raises(ValueError, match=r"^a numerics fingerprint is an object, got list$"):
        NumericsFingerprint.from_dict([SKYLAKE.as_dict()])


def test_a_record_with_its_optional_fields_empty_comes_back() -> None:
    bare = dataclasses.replace(FIXED, scipy=None, native_threads=None, float32_gemm=None)
    assert NumericsFingerprint.from_dict(json.loads(json.dumps(bare.as_dict()))) == bare


def test_one_fingerprint_differs_from_nothing() -> None:
    import numpy as np

    assert numerics_differences([HASWELL_FIXED]) == {}
    assert numerics_differences([HASWELL_FIXED], [np.float64]) == {}


def test_this_process_s_libraries_are_threadpoolctl_s_own_figures() -> None:
    from threadpoolctl import threadpool_info

    import minitorch_accum.kernels as K

    here = numerics_fingerprint()
    infos = [info for info in threadpool_info() if info.get("user_api") == "blas"]
    assert sorted((b.library, b.version, b.kernel, b.threads) for b in here.blas) == sorted(
        (info["internal_api"], info["version"], info.get("architecture"), info["num_threads"]) for info in infos)
    assert here.native_threads == K.native_threads()


def test_a_library_without_version_or_kernel_comes_back_and_unknown_names_are_kept() -> None:
    odd = dataclasses.replace(SKYLAKE, blas=(BlasLibrary("numpy", "accelerate", None, None, 1),), native_threads=1)
    assert NumericsFingerprint.from_dict(json.loads(json.dumps(odd.as_dict()))) == odd
    assert odd.blas[0].described() == "accelerate (1 thread)"
    assert odd.describe().endswith("kernels native (1 thread)")


def test_a_library_is_owned_by_the_package_that_ships_it() -> None:
    from minitorch_accum.backend.numerics import _owner

    assert _owner(os.path.join(os.sep, "env", "numpy.libs", "libscipy_openblas64_.so")) == "numpy"
    assert _owner(os.path.join(os.sep, "env", "torch", "lib", "libgomp.so")) == "torch"
    assert _owner(os.path.join(os.sep, "usr", "lib", "libblas.so.3")) == "libblas.so.3"
    assert _owner("") == "?"
