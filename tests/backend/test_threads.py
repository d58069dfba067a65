"""One place decides the threads of every CPU pool: NumPy's and SciPy's OpenBLAS, the native
kernels' pool and PyTorch's; the default follows MTA_THREADS, else the free CPUs by the load."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
from threadpoolctl import threadpool_info, threadpool_limits

import minitorch_accum as mta
from minitorch_accum import kernels
from minitorch_accum.backend import THREADS_ENV, available_cpus, default_threads, set_threads, thread_summary
from minitorch_accum.backend import threads as threads_module


@pytest.fixture(autouse=True)
def _restore_pools() -> Iterator[None]:
    native = kernels.native_threads()
    with threadpool_limits(limits=None):  # on exit, every BLAS/OpenMP pool gets its count back
        yield
    kernels.set_native_threads(native or 0)


def _blas_threads() -> set[int]:
    return {int(info["num_threads"]) for info in threadpool_info()}


def test_set_threads_reaches_every_blas_pool_and_the_native_one() -> None:
    settings = mta.set_threads(1)
    assert settings.requested == 1 and _blas_threads() == {1}
    assert {"numpy openblas", "scipy openblas"} <= set(settings.blas)
    if kernels.native_available():
        assert settings.native == kernels.native_threads() == 1
    assert "threads 1 (set by the caller)" in thread_summary()


def test_the_native_pool_gives_the_same_sums_on_one_thread_and_on_all() -> None:
    rng = np.random.default_rng(0)
    g = rng.standard_normal(1 << 18).astype(np.float32)
    results = []
    for n in (1, available_cpus()):
        kernels.set_native_threads(n)
        acc = np.ones_like(g)
        kernels.add_scale(acc, g, 0.5)
        results.append(acc)
    assert np.array_equal(results[0], results[1])


def test_the_environment_sets_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(THREADS_ENV, "1")
    assert default_threads() == (1, f"{THREADS_ENV}=1")
    assert set_threads().source == f"{THREADS_ENV}=1" and _blas_threads() == {1}
    monkeypatch.setenv(THREADS_ENV, "two")
    with pytest.raises(ValueError, match=THREADS_ENV):
        default_threads()


@pytest.mark.parametrize(("load", "expected"), [(0.2, "all"), (9.0, 1)])
def test_without_the_environment_a_busy_machine_gets_fewer_threads(monkeypatch: pytest.MonkeyPatch, load: float,
                                                                    expected: object) -> None:
    monkeypatch.delenv(THREADS_ENV, raising=False)
    monkeypatch.setattr(threads_module.os, "getloadavg", lambda: (load, load, load))
    count, why = default_threads()
    assert count == (available_cpus() if expected == "all" else expected) and f"load {load:.2f}" in why


@pytest.mark.parametrize("bad", [0, -2, True, 1.5, "3"])
def test_a_bad_count_is_refused_naming_it(bad: object) -> None:
    with pytest.raises(ValueError, match="threads"):
        set_threads(bad)  # type: ignore[arg-type]


def test_the_commands_take_threads_from_the_settings_table() -> None:
    from minitorch_accum.cli.main import build_parser
    from minitorch_accum.train.settings import read_options

    for command in ("train", "compare", "explain"):
        args = build_parser().parse_args([command, "--threads", "1"])
        assert read_options(args, command)["threads"] == 1
        assert read_options(build_parser().parse_args([command]), command)["threads"] is None

