"""The ``maccum`` command: train, compare, explain, bench and kernels."""

from minitorch_accum.cli.main import main

__all__ = ["main"]
