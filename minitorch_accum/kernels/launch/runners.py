"""Where a launch plan runs: the CPU launch emulator or a CUDA device through CuPy."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from minitorch_accum.kernels.arrays import Array, HostArray
from minitorch_accum.kernels.launch import cuda_module, emulator
from minitorch_accum.kernels.launch.plan import Launch

__all__ = ["Runner", "runner_for"]


@dataclass(frozen=True)
class Runner:
    """What a plan needs from a device: addresses, a grid size, scratch arrays, and launching."""

    address_of: Callable[[Array], int]
    sm_count: int
    empty_f64: Callable[[int], Array]
    run: Callable[[Iterable[Launch]], None]
    to_host: Callable[[Array], HostArray]


_EMULATED = Runner(
    address_of=emulator.address_of,
    sm_count=emulator.SM_COUNT,
    empty_f64=lambda n: np.empty(n, dtype=np.float64),
    run=emulator.run,
    to_host=np.asarray,
)


def runner_for(device: str) -> Runner:
    """ "host" runs on the emulator, "cuda:N" on CUDA device N."""
    if device == "host":
        return _EMULATED
    device_id = int(device.removeprefix("cuda:"))
    return Runner(
        address_of=cuda_module.address_of,
        sm_count=cuda_module.sm_count(device_id),
        empty_f64=lambda n: cuda_module.empty_f64(n, device_id),
        run=lambda launches: cuda_module.run(launches, device_id),
        to_host=lambda x: x.get(),
    )
