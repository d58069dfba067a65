"""Developer tools for the CUDA sources: NVRTC compilation without a GPU (``nvrtc``),
registers and shared memory from nvcc (``resource_usage``), and the command line
``python -m minitorch_accum.kernels`` (``command``). Nothing here runs a kernel."""

from __future__ import annotations

__all__: list[str] = []
