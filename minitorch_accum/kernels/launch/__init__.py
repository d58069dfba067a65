"""How the CUDA kernels of csrc/*.cu are launched, on a GPU or on the CPU.

``plan`` turns a kernel call into launches (names, grid and block, the C
arguments, the multi-tensor chunk tables); ``runners`` executes a plan on the
CPU launch emulator (``emulator``, the native module's face) or on a CUDA
device through CuPy (``cuda_module``, the cupy.RawModule face).
"""

from __future__ import annotations

from minitorch_accum.kernels.launch.plan import ByValue, Launch, forced_shape, table_limits
from minitorch_accum.kernels.launch.runners import Runner, runner_for

__all__ = ["ByValue", "Launch", "Runner", "forced_shape", "runner_for", "table_limits"]
