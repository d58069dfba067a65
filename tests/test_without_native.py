"""Without the compiled module the package still imports, trains on the NumPy reference
kernels, and says so exactly once."""

from __future__ import annotations

import subprocess
import sys
import textwrap

# the start of each script: the native module cannot be imported, as where no compiler built it
WITHOUT_NATIVE = textwrap.dedent("""
    import importlib.abc, sys

    class NoCompiler(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "minitorch_accum._native":
                raise ImportError("built without a C++ compiler")
            return None

    sys.meta_path.insert(0, NoCompiler())
""")


def test_package_runs_on_reference_kernels_with_one_warning() -> None:
    script = WITHOUT_NATIVE + textwrap.dedent("""
        import warnings
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            import numpy as np
            import minitorch_accum as mta
            from minitorch_accum import kernels, nn, optim
            from minitorch_accum.accum import Accumulator
            from minitorch_accum.nn import functional as F
            model = nn.Sequential(nn.Linear(4, 3))
            acc = Accumulator(model, steps=2)
            for _ in range(2):
                acc.backward(F.cross_entropy(model(mta.ones(5, 4)), np.zeros(5, dtype=np.int64), reduction="sum"),
                             num_items=5)
            optim.SGD(0.1, momentum=0.9).step(model, acc)
        names = [type(w.message).__name__ for w in caught]
        print(kernels.kernel_path(), names.count("NativeExtensionMissingWarning"), str(caught[0].message))
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    path, count, message = result.stdout.strip().split(" ", 2)
    assert path == "reference" and count == "1"
    assert "reference" in message.lower()


def test_peak_memory_without_the_native_module_counts_arrays_and_never_starts_tracemalloc() -> None:
    # the ctypes fallback counts arrays only; Python objects come from tracemalloc when the user
    # traces already (its start and stop around each probe leaked), else they are not measured
    script = WITHOUT_NATIVE + textwrap.dedent("""
        import tracemalloc
        import numpy as np
        from minitorch_accum.observe import PeakMemory
        from minitorch_accum.observe.array_tracker import array_tracker

        with PeakMemory() as plain:
            a = np.empty(10_000, dtype=np.uint8)
            objects = [str(i) * 3 for i in range(5000)]
        tracing_after_plain = tracemalloc.is_tracing()
        tracemalloc.start()
        with PeakMemory() as traced:
            b = np.empty(20_000, dtype=np.uint8)
            more = [str(i) * 3 for i in range(5000)]
        tracemalloc.stop()
        print(type(array_tracker()).__name__, plain.array_peak_bytes, plain.peak_bytes, plain.other_bytes,
              tracing_after_plain, traced.array_peak_bytes, traced.other_bytes > 5000 * 40)
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["PythonArrayTracker", "10000", "10000", "None", "False", "20000", "True"]
