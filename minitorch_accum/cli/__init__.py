"""The ``maccum`` command: train, compare, explain, bench, kernels and bugs."""

from minitorch_accum.cli.main import main

__all__ = ["main"]
