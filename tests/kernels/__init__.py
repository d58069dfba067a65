"""Tests of minitorch_accum.kernels: CPU paths always, CuPy on a GPU."""
