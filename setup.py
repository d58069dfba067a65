"""Build the optional native CPU module `minitorch_accum._native` (pybind11, SIMD, its own thread pool).

The extension is optional: when no C++ compiler is available the package still
installs and runs on its NumPy reference kernels, and says so once at import.
"""

from __future__ import annotations

import sys
from glob import glob

from pybind11.setup_helpers import Pybind11Extension, build_ext
from setuptools import setup

# -ffp-contract=off: the kernels must round exactly as the NumPy reference does
# (no fused multiply-add), so every path gives bit-identical accumulators.
# -fno-math-errno: sqrt may then be a vector instruction (it only drops errno; the
# results are the same correctly rounded values).
# -fopenmp-simd: only the `omp simd` loop pragmas, no OpenMP runtime. The threads are
# the module's own pool (csrc/native/thread_pool.cpp): libgomp's fork-join barrier
# made a pass wait for a helper whose core another process held (~11 ms instead of
# 0.3 ms for 2^20 elements on a shared 2-core machine).
compile_args = [
    "-O3", "-fopenmp-simd", "-pthread", "-ffp-contract=off", "-fno-math-errno", "-fno-strict-aliasing",
    "-fvisibility=hidden",
]
link_args = ["-pthread"]
if sys.platform == "darwin":  # Apple clang has no -fopenmp-simd by default; threads need no flag
    compile_args = [a for a in compile_args if a not in ("-fopenmp-simd", "-pthread")]
    link_args = []

native = Pybind11Extension(
    "minitorch_accum._native",
    sorted(glob("csrc/native/*.cpp")),
    include_dirs=["csrc"],
    depends=sorted(glob("csrc/*.cuh") + glob("csrc/*.cu") + glob("csrc/native/*.h*")),
    extra_compile_args=compile_args,
    extra_link_args=link_args,
    cxx_std=17,
    optional=True,
)

setup(ext_modules=[native], cmdclass={"build_ext": build_ext})
