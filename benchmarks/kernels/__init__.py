"""Kernel microbenchmark: the fused accumulation kernels against NumPy, PyTorch and the
machine's own memory bandwidth, measured side by side in one run.

``settings`` (what a run measures), ``arrays`` (host or CUDA arrays, timers, torch views),
``variants`` (what is timed), ``cases`` (the size sweep and the model-shaped list),
``measure`` (medians, GB/s, limit, ratios), ``targets``, ``report`` (table, plot), ``main``.
"""

from benchmarks.kernels.main import KERNELS, main
from benchmarks.kernels.settings import Settings, full_settings, quick_settings

__all__ = ["KERNELS", "Settings", "full_settings", "main", "quick_settings"]
