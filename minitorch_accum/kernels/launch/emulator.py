"""The CPU launch emulator: runs the CUDA kernels of csrc/*.cu on the CPU.

The native module compiles each .cu file unchanged as C++ (with the shims of
csrc/native/cuda_emulation.h) and runs a launch block by block; threads of a
block that synchronizes run as fibers switching at each __syncthreads(). This
module turns the CuPy-style launches of launch_plan.py into its arguments:
NumPy arrays become addresses, structs passed by value become their bytes.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from minitorch_accum.kernels.arrays import HostArray
from minitorch_accum.kernels.dispatch import native
from minitorch_accum.kernels.launch.plan import ByValue, Launch

__all__ = ["SM_COUNT", "address_of", "kernels", "launch", "run"]

# Grid sizing for emulated grid-stride launches: a small "GPU" keeps the
# number of emulated threads (and the emulator's time) modest, while every
# thread still strides over several elements.
SM_COUNT = 4


def address_of(x: HostArray) -> int:
    """The address of an array's first element."""
    return int(x.__array_interface__["data"][0])


def _argument(x: Any) -> Any:  # a C argument of a Launch, as the native module takes it
    if x is None:
        return None
    if isinstance(x, np.ndarray):
        return address_of(x)
    if isinstance(x, ByValue):
        return x.array.tobytes()
    return x


def _dims(shape: int | Sequence[int]) -> tuple[int, ...]:
    return (shape,) if isinstance(shape, int) else tuple(shape)


def launch(kernel: str, grid: int | Sequence[int], block: int | Sequence[int], *args: Any) -> None:
    """Run one CUDA kernel on the CPU for this grid and block (1 to 3 dimensions).

    Arguments follow the kernel's C parameters: NumPy arrays (or None) for
    pointers, NumPy scalars of the exact C type, ByValue for structs.
    Launches are serialized by a mutex in the extension.
    """
    native().emulator_launch(kernel, _dims(grid), _dims(block), [_argument(a) for a in args])


def run(launches: Iterable[Launch]) -> None:
    """Execute a plan of launch_plan.py on the CPU."""
    emulate = native().emulator_launch
    for step in launches:
        emulate(step.kernel, step.grid, step.block, [_argument(a) for a in step.args])


def kernels() -> dict[str, tuple[int, int, bool]]:
    """Emulated kernels: name -> (number of arguments, max threads per block, uses __syncthreads)."""
    return dict(native().emulator_kernels())
