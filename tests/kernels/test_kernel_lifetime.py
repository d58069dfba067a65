"""A multi-tensor kernel keeps its arrays alive: another thread that empties the
caller's lists while the kernel runs (GIL released) must not crash the process.

The race runs in a child process, so a crash fails the test instead of killing
pytest. The arrays are large enough (8 MiB each) that NumPy maps them on their
own and unmaps them when freed: a kernel that touches a freed one faults at once.
The other thread waits for the kernel to be under way (the caller is past its
Python checks within microseconds; the kernel itself takes milliseconds) before
it empties the lists.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import minitorch_accum
import minitorch_accum.kernels as K

pytestmark = pytest.mark.skipif(not K.native_available(), reason="needs the native extension")

_RACE = textwrap.dedent("""
    import sys, threading, time
    import numpy as np
    import minitorch_accum.kernels as K

    path, kernel = sys.argv[1], sys.argv[2]
    N, COUNT = 1 << 21, 6

    def call(lists):
        if kernel == "multi_add_scale":
            K.multi_add_scale(lists[0], lists[1], 0.5)
        elif kernel == "multi_add_scale_compensated":
            K.multi_add_scale_compensated(lists[0], lists[2], lists[1], 0.5)
        elif kernel == "multi_l2_norm":
            K.multi_l2_norm(lists[1])
        elif kernel == "multi_sgd_momentum_step":
            K.multi_sgd_momentum_step(lists[0], lists[1], lists[2], lr=0.1, momentum=0.9)
        else:
            K.multi_adamw_step(lists[0], lists[1], lists[2], lists[3], lr=1e-3, beta1=0.9, beta2=0.99, eps=1e-8,
                               weight_decay=0.0, step=1)

    for _ in range(3):
        lists = [[np.ones(N, np.float32) for _ in range(COUNT)] for _ in range(4)]
        started = threading.Event()

        def drop():
            started.wait()
            time.sleep(0.0005)  # the caller is inside the kernel by now (it takes milliseconds)
            for items in lists:
                items.clear()

        thread = threading.Thread(target=drop)
        thread.start()
        with K.use_path(path):
            started.set()
            call(lists)
        thread.join()
    print("survived")
""")


@pytest.mark.parametrize(
    ("path", "kernel"),
    [
        ("native", "multi_add_scale"),
        ("native", "multi_add_scale_compensated"),
        ("native", "multi_l2_norm"),
        ("native", "multi_sgd_momentum_step"),
        ("native", "multi_adamw_step"),
        # every emulated kernel goes through the same launch planner: one of each table depth
        ("emulated", "multi_add_scale"),
        ("emulated", "multi_adamw_step"),
    ],
)
def test_emptying_the_lists_during_a_kernel_does_not_crash(path, kernel):
    root = str(Path(minitorch_accum.__file__).resolve().parent.parent)
    result = subprocess.run(
        [sys.executable, "-c", _RACE, path, kernel],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=root,
        env={**os.environ, "PYTHONPATH": root},
    )
    assert result.returncode == 0 and "survived" in result.stdout, (
        f"{kernel} on {path} died (exit status {result.returncode}):\n{result.stderr[-2000:]}"
    )
