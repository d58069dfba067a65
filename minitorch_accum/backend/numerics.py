"""What this process computes with, beyond the settings: the numerics fingerprint.

Two data-parallel ranks, or a run and its resume, can hold the same settings, data and model
and still round differently: the BLAS kernel OpenBLAS picks for the CPU (or that
``OPENBLAS_CORETYPE`` forces) and NumPy's SIMD loops (its dispatch target, which
``NPY_DISABLE_CPU_FEATURES`` can lower) order and round their sums in their own way. The
README's "two ranks equal one process bit for bit" holds only when those agree.

``numerics_fingerprint()`` records, for this process: each loaded BLAS (who ships it, the
library, its version, its kernel as threadpoolctl reports it, its threads), NumPy's and SciPy's
versions, NumPy's highest enabled SIMD dispatch target, the native kernels' path and threads.
Only ``COMPARED`` fields decide whether two fingerprints compute alike; the rest is recorded
for information. Measured here (Intel Xeon with AVX-512, OpenBLAS autodetecting SkylakeX;
``maccum train --micro-batch 32 --accum 4 --compensated``, digits float64 3 epochs and chars
float32 2 epochs, final parameters compared bit for bit with ``--threads 1``):

| changed                                             | digits float64 | chars float32 |
| --------------------------------------------------- | -------------- | ------------- |
| OPENBLAS_CORETYPE=Haswell                            | 3931/9610 differ, 8.3e-17 | equal (1)                    |
| OPENBLAS_CORETYPE=Sandybridge                        | 4549/9610 differ, 8.2e-16 | (not run) |
| NumPy SIMD X86_V2 (NPY_DISABLE_CPU_FEATURES)         | equal | 105040/105856 differ, 6.1e-5 |
| NumPy SIMD X86_V3 instead of AVX512_SPR              | equal | equal (but np.exp/log1p/log of float64 differ) |
| BLAS and native threads 2 (``--threads 2``)          | equal | equal |
| BLAS threads 2, native pool 1 (MTA_NUM_THREADS=1)    | equal | equal |
| MTA_KERNELS=reference instead of native              | equal | equal |
| MTA_SIMD=avx2 or baseline (native kernels' SIMD)     | equal | equal |
| MTA_GEMM=scipy (SciPy's OpenBLAS for the GEMMs)     | equal | 104023/105856 differ, 3.3e-5 (2) |
| NumPy 2.2.6 + OpenBLAS 0.3.29 instead of 2.4.6 + 0.3.31 | equal | equal |

(1) 103929/105856 differed, 6.1e-5, before the float32 GEMM of our own; (2) equal before it.

Since 2026-12-04 float32 products run the native module's own GEMM (``kernels.gemm``, one
summation order on every machine, with or without NumPy's bundled OpenBLAS; stacks whose batch
axes broadcast too), so the chars float32 run no longer depends on the BLAS kernel; float64
products still are OpenBLAS's, and so are float32 products where the native module is missing or
``MTA_GEMM=ctypes|scipy`` asks for the BLAS. The fingerprint records who rounds float32 products
(``float32_gemm``: ``FIXED_ORDER`` or ``BLAS (why)``), and a comparison told the dtypes of the
run's products (``numerics_differences(..., products=)``, the model's parameter dtypes) leaves the
BLAS out when it rounds none of them: only float32 products, every process on the native GEMM.
Told nothing, everything is compared (the BLAS may round a float64 product).

So the BLAS library with its kernel (where it rounds a product of the run), who rounds float32
products (where the run has them) and NumPy's SIMD target are compared; thread counts (OpenBLAS
splits a GEMM's output, never its sums, and the native kernels sum in chunk order whatever the
threads), the kernel path and the versions are recorded only.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from minitorch_accum import kernels
from minitorch_accum.backend.blas import FIXED_ORDER, float32_gemm_route

__all__ = ["BIT_IDENTITY_NEEDS", "COMPARED", "UNRECORDED", "BlasLibrary", "NumericsFingerprint", "compared_fields",
           "numerics_differences", "numerics_fingerprint"]

#: the fields that change the bits of a run (see the module's table), by the name messages use
COMPARED = ("BLAS", "float32 GEMM", "NumPy SIMD")

BIT_IDENTITY_NEEDS = ("bit for bit needs every rank, and the machine a run resumes on, to compute with the same "
                      "BLAS library and kernel where the BLAS rounds a product (float64 products, float32 ones "
                      "without the native GEMM; OpenBLAS picks the kernel for the CPU, OPENBLAS_CORETYPE sets it), "
                      "the same route for float32 products and the same NumPy SIMD target "
                      "(NPY_DISABLE_CPU_FEATURES lowers it); thread counts and the kernel path do not change the "
                      "bits; otherwise the results are equal up to rounding")

#: how a record written before ``float32_gemm`` was kept reads (float32 products then were the BLAS's)
UNRECORDED = "not recorded (a record of before 2026-12-05)"

_LIBRARY_NAMES = {"openblas": "OpenBLAS", "mkl": "MKL", "blis": "BLIS", "flexiblas": "FlexiBLAS"}
_OWNERS = ("numpy", "scipy", "torch", "sklearn")


@dataclass(frozen=True)
class BlasLibrary:
    """One loaded BLAS: who ships it (``numpy``, ``scipy``, else its file's name), the library
    (threadpoolctl's ``internal_api``), its version, its kernel (OpenBLAS's core type; None where
    the library does not say) and its threads."""

    owner: str
    library: str
    version: str | None
    kernel: str | None
    threads: int

    @property
    def computes_with(self) -> str:
        """What decides its rounding: ``OpenBLAS SkylakeX`` (a library without a kernel: its version)."""
        name = _LIBRARY_NAMES.get(self.library, self.library)
        return f"{name} {self.kernel or self.version or '(kernel unknown)'}"

    def described(self) -> str:
        """``OpenBLAS 0.3.31 SkylakeX (2 threads)``: every field."""
        name = _LIBRARY_NAMES.get(self.library, self.library)
        words = " ".join(word for word in (name, self.version, self.kernel) if word)
        return f"{words} ({_threads(self.threads)})"


@dataclass(frozen=True)
class NumericsFingerprint:
    """What one process computes with (see the module's docstring for which fields count)."""

    blas: tuple[BlasLibrary, ...]
    numpy: str
    scipy: str | None
    numpy_simd: str
    kernel_path: str
    native_threads: int | None
    float32_gemm: str | None = None  # who rounds float32 products; None: a record of before it was kept

    def compared(self) -> dict[str, str]:
        """The fields that change the bits, each in words: ``{"BLAS": "OpenBLAS SkylakeX", ...}``."""
        kinds = list(dict.fromkeys(library.computes_with for library in self.blas))
        if len(kinds) <= 1:
            blas = kinds[0] if kinds else "none loaded"
        else:  # the libraries use different kernels: say whose is which
            blas = ", ".join(f"{library.computes_with} ({library.owner})" for library in self.blas)
        return {"BLAS": blas, "float32 GEMM": self.float32_gemm or UNRECORDED, "NumPy SIMD": self.numpy_simd}

    def describe(self) -> str:
        """One line: every field, the compared ones first."""
        blas = ", ".join(f"{library.owner}'s {library.described()}" for library in self.blas) or "none loaded"
        native = "" if self.native_threads is None else f" ({_threads(self.native_threads)})"
        return (f"BLAS {blas}; float32 GEMM {self.float32_gemm or UNRECORDED}; NumPy {self.numpy} "
                f"(SIMD {self.numpy_simd}); SciPy {self.scipy or 'not installed'}; kernels {self.kernel_path}{native}")

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON: what a checkpoint records and the ranks exchange."""
        record = asdict(self)
        record["blas"] = [asdict(library) for library in self.blas]
        return record

    @classmethod
    def from_dict(cls, record: Any) -> NumericsFingerprint:
        """The fingerprint ``as_dict`` gave; ValueError naming the first field that is missing or
        of the wrong type (a record edited by hand, or written by another version)."""
        if not isinstance(record, Mapping):
            raise ValueError(f"a numerics fingerprint is an object, got {type(record).__name__}")
        blas = _field(record, "blas", list)
        return cls(blas=tuple(_library(entry, position) for position, entry in enumerate(blas)),
                   numpy=_field(record, "numpy", str), scipy=_field(record, "scipy", str, optional=True),
                   numpy_simd=_field(record, "numpy_simd", str), kernel_path=_field(record, "kernel_path", str),
                   native_threads=_field(record, "native_threads", int, optional=True),
                   float32_gemm=(_field(record, "float32_gemm", str, optional=True)
                                 if "float32_gemm" in record else None))


def _threads(count: int) -> str:
    return f"{count} thread{'' if count == 1 else 's'}"


def _field(record: Mapping[str, Any], key: str, kind: type, optional: bool = False, where: str = "") -> Any:
    name = f"'{where}{key}'"
    if key not in record:
        raise ValueError(f"the numerics fingerprint lacks {name}")
    value = record[key]
    if (value is None and optional) or (type(value) is kind):
        return value
    raise ValueError(f"the numerics fingerprint's {name} is {value!r:.60}, not {kind.__name__}")


def _library(entry: Any, position: int) -> BlasLibrary:
    where = f"blas[{position}]."
    if not isinstance(entry, Mapping):
        raise ValueError(f"the numerics fingerprint's blas[{position}] is {entry!r:.60}, not an object")
    return BlasLibrary(owner=_field(entry, "owner", str, where=where),
                       library=_field(entry, "library", str, where=where),
                       version=_field(entry, "version", str, optional=True, where=where),
                       kernel=_field(entry, "kernel", str, optional=True, where=where),
                       threads=_field(entry, "threads", int, where=where))


def compared_fields(fingerprints: Sequence[NumericsFingerprint],
                    products: Iterable[Any] | None = None) -> tuple[str, ...]:
    """The ``COMPARED`` fields that can change the bits of a run whose products are of the dtypes
    ``products`` (None: not known, so every one): who rounds float32 products only with float32
    among them; the BLAS unless it rounds none of them (no float64, and float32 products on the
    native GEMM in every fingerprint; float16 and bfloat16 products are NumPy's own loops)."""
    if products is None:
        return COMPARED
    names = {np.dtype(dtype).name for dtype in products}
    float32 = "float32" in names
    fixed = all(fingerprint.float32_gemm == FIXED_ORDER for fingerprint in fingerprints)
    blas = "float64" in names or (float32 and not fixed)
    return tuple(name for name, kept in zip(COMPARED, (blas, float32, True), strict=True) if kept)


def numerics_differences(fingerprints: Sequence[NumericsFingerprint],
                         products: Iterable[Any] | None = None) -> dict[str, list[str]]:
    """For each compared field on which the fingerprints differ: every fingerprint's value, in
    their order (empty when they all compute alike, whatever their threads or versions).
    ``products``: the dtypes of the run's products (its parameters'), which leave out the fields
    that cannot change its bits (``compared_fields``); None compares every field."""
    values = [fingerprint.compared() for fingerprint in fingerprints]
    return {name: [v[name] for v in values] for name in compared_fields(fingerprints, products)
            if any(v[name] != values[0][name] for v in values)}


def _owner(path: str) -> str:
    parts = path.split(os.sep)
    owner = next((name for name in _OWNERS if name in parts or f"{name}.libs" in parts), None)
    return owner or os.path.basename(path) or "?"


def _numpy_simd() -> str:
    """NumPy's highest enabled SIMD dispatch target (its loops pick the best one the CPU has and
    NPY_DISABLE_CPU_FEATURES leaves), else the lowest its build assumes (``baseline X86_V2``)."""
    try:
        from numpy._core import _multiarray_umath as umath  # NumPy 2
    except ImportError:  # pragma: no cover - NumPy 1.x
        from numpy.core import _multiarray_umath as umath  # type: ignore[no-redef]
    features = getattr(umath, "__cpu_features__", {})
    enabled = [target for target in getattr(umath, "__cpu_dispatch__", ()) if features.get(target)]
    if enabled:
        return enabled[-1]
    baseline = list(getattr(umath, "__cpu_baseline__", ()))
    return f"baseline {baseline[-1]}" if baseline else "baseline"


def numerics_fingerprint() -> NumericsFingerprint:
    """This process's fingerprint now (SciPy's BLAS is always listed: backend/numpy_backend.py loads it)."""
    import scipy
    from threadpoolctl import threadpool_info

    blas = tuple(sorted(
        (BlasLibrary(owner=_owner(str(info.get("filepath", ""))), library=str(info.get("internal_api", "?")),
                     version=info.get("version"), kernel=info.get("architecture"),
                     threads=int(info.get("num_threads", 0)))
         for info in threadpool_info() if info.get("user_api") == "blas"),
        key=lambda library: (library.owner, library.library)))
    return NumericsFingerprint(blas=blas, numpy=np.__version__, scipy=scipy.__version__,
                               numpy_simd=_numpy_simd(), kernel_path=kernels.kernel_path(),
                               native_threads=kernels.native_threads(), float32_gemm=float32_gemm_route())
