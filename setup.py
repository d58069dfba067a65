"""Build the optional native CPU module `minitorch_accum._native` (pybind11 + OpenMP).

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
compile_args = ["-O3", "-fopenmp", "-ffp-contract=off", "-fno-math-errno", "-fno-strict-aliasing", "-fvisibility=hidden"]
link_args = ["-fopenmp"]
if sys.platform == "darwin":  # Apple clang has no -fopenmp by default
    compile_args = [a for a in compile_args if a != "-fopenmp"]
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
