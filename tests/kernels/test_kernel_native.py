"""The native CPU module as a neighbour: safe after fork, across Python threads; and the
NumPy reference's twin, signature for signature."""

from __future__ import annotations

import inspect
import os
import re
import sys
import threading
import time
import warnings

import numpy as np
import pytest

import minitorch_accum.kernels as K
from minitorch_accum.kernels import reference
from minitorch_accum.kernels.dispatch import native
from minitorch_accum.kernels.optimizer_scalars import adam_scalars
from tests.kernels.kernel_cases import on_path

pytestmark = pytest.mark.skipif(not K.native_available(), reason="needs the native extension")


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_forked_child_runs_kernels_after_the_parent_used_its_threads():
    # libgomp's thread pool does not survive fork; a child must not wait for it
    a = np.zeros(1 << 20, np.float32)
    g = np.ones(1 << 20, np.float32)
    with on_path("native"):
        K.add_scale(a, g, 1.0)  # wakes the OpenMP team in the parent
    read, write = os.pipe()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # 3.12+: fork of a threaded process
        pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through the pipe
        try:
            with on_path("native"):
                K.add_scale(a, g, 1.0)
                K.multi_add_scale([a], [g], 1.0)
                ok = a[0] == 3.0 and K.l2_norm(g) == 1024.0
            os.write(write, b"1" if ok else b"0")
        finally:
            os._exit(0)
    os.close(write)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        time.sleep(0.05)
    else:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        pytest.fail("a forked child hung in a native kernel")
    assert os.read(read, 1) == b"1"
    os.close(read)


def test_kernels_give_correct_results_from_many_threads_at_once():
    n = 1 << 18
    accs = [np.zeros(n, np.float32) for _ in range(4)]
    g = np.ones(n, np.float32)
    errors: list[BaseException] = []

    def work(acc: np.ndarray) -> None:
        try:
            with on_path("native"):
                for _ in range(20):
                    K.add_scale(acc, g, 0.5)
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=work, args=(acc,)) for acc in accs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for acc in accs:
        assert (acc == 10.0).all()


def test_small_calls_stay_cheap():
    # no benchmark: a guard against an accidental per-call cost (imports, env parsing)
    acc, g = np.zeros(8, np.float32), np.ones(8, np.float32)
    with on_path("native"):
        start = time.perf_counter()
        for _ in range(2000):
            K.add_scale(acc, g, 1.0)
        per_call = (time.perf_counter() - start) / 2000
    assert acc[0] == 2000.0
    assert per_call < 50e-6, per_call
    assert sys.getrefcount(g) < 10  # no reference leaked per call


def _native_parameters(function) -> list[tuple[str, bool]]:
    """(name, has a default) of each parameter, from pybind11's signature line."""
    first = function.__doc__.splitlines()[0]
    inside = first[first.index("(") + 1 : first.rindex(") ->")]
    return [(part.split(":")[0].strip(), "=" in part) for part in re.split(r",\s*(?=\w+:)", inside)]


def test_reference_and_native_module_share_every_signature():
    # one host branch calls either module with the same arguments
    for name in K.KERNELS:
        expected = [
            (p.name, p.default is not inspect.Parameter.empty)
            for p in inspect.signature(getattr(reference, name)).parameters.values()
        ]
        assert _native_parameters(getattr(native(), name)) == expected, name


def test_native_steps_read_the_scalars_object_by_field():
    p, g, m, v = (np.ones(4, np.float32) for _ in range(4))
    h = adam_scalars("adamw_step", 0.1, 0.9, 0.99, 1e-8, 0.0, 1, 1.0, True)
    native().adamw_step(p, g, m, v, h)
    reference.adamw_step(p2 := np.ones(4, np.float32), g, np.ones(4, np.float32), np.ones(4, np.float32), h)
    assert (p == p2).all()
    with pytest.raises(TypeError, match=r"adamw_step: scalars\.decay is missing or not a number \(got dict"):
        native().adamw_step(p, g, m, v, {"decay": 1.0})
    with pytest.raises(TypeError, match=r"sgd_momentum_step: scalars\.lr is missing"):
        native().sgd_momentum_step(p, g, m, h)  # Adam's scalars for an SGD step
