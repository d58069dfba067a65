"""The op-level benchmark: GELU, LayerNorm, cross entropy, embedding backward, the K-blocked
weight-gradient GEMM and 3-D @ 2-D matmuls, ours against PyTorch's ops (and the NumPy forms
they replaced), at the char transformer's shapes."""

from benchmarks.layer_ops.main import LAYER_OPS, main
from benchmarks.layer_ops.settings import Settings, full_settings, quick_settings

__all__ = ["LAYER_OPS", "Settings", "full_settings", "main", "quick_settings"]
