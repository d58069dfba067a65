"""A Backend written to the interface as it was before ``gemm_into`` took ``background`` (a user's
subclass that overrides it with the five arguments) still fuses its weight gradients into the
arena: the store hands the GEMM to the background only where the backend can take it."""

from __future__ import annotations

import numpy as np
import pytest

import minitorch_accum as mta
from minitorch_accum.accum.arena_store import ArenaStore
from minitorch_accum.backend.numpy_backend import NumpyBackend
from minitorch_accum.backend.threads import thread_settings


class _FiveArguments(NumpyBackend):
    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[tuple[int, ...], float]] = []

    def gemm_into(self, a: np.ndarray, b: np.ndarray, out: np.ndarray, alpha: float, beta: float) -> bool:
        self.calls.append((out.shape, beta))
        return super().gemm_into(a, b, out, alpha, beta)


class _Keywords(NumpyBackend):
    def __init__(self) -> None:
        super().__init__()
        self.seen: list[dict[str, object]] = []

    def gemm_into(self, a: np.ndarray, b: np.ndarray, out: np.ndarray, alpha: float, beta: float,
                  **options: object) -> bool:
        self.seen.append(options)
        return super().gemm_into(a, b, out, alpha, beta, **options)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_backend_whose_gemm_into_takes_five_arguments_still_fuses_the_weight_gradient(threads: int,
                                                                                        dtype: str) -> None:
    previous = thread_settings().requested
    mta.set_threads(threads)
    try:
        rng = np.random.default_rng(1)
        w0 = rng.standard_normal((40, 24)).astype(dtype)
        xs = [rng.standard_normal((600, 40)).astype(dtype) for _ in range(2)]
        sums = []
        for backend in (_FiveArguments(), NumpyBackend()):
            weight = mta.Tensor(w0.copy(), requires_grad=True, _backend=backend)
            store = ArenaStore([("weight", weight)], dtype)
            for x in xs:
                store.micro_batch((mta.Tensor(x, _backend=backend) @ weight).sum(), None, 0.5)
            sums.append(store.views()[0][1].copy())
            if isinstance(backend, _FiveArguments):  # fused: the GEMM wrote the view, beta 0 then 1
                assert backend.calls == [((40, 24), 0.0), ((40, 24), 1.0)]
        np.testing.assert_array_equal(sums[0], sums[1])  # the background's bits are the caller's
        want = 0.5 * (xs[0].sum(axis=0) + xs[1].sum(axis=0)).astype(np.float64)[:, None] * np.ones((1, 24))
        np.testing.assert_allclose(sums[0], want, atol=1e-3 if dtype == "float32" else 1e-10)
    finally:
        mta.set_threads(previous)


def test_a_backend_that_takes_keywords_is_handed_the_background() -> None:
    backend = _Keywords()
    weight = mta.Tensor(np.ones((40, 24)), requires_grad=True, _backend=backend)
    store = ArenaStore([("weight", weight)], "float64")
    x = mta.Tensor(np.ones((600, 40)), _backend=backend)
    store.micro_batch((x @ weight).sum(), None, 1.0)
    assert backend.seen == [{"background": True}]
    np.testing.assert_array_equal(store.views()[0][1], np.full((40, 24), 600.0))
