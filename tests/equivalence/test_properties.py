"""The proof, property by property, that k micro-batches give the gradient of one big batch,
and where they do not. Each test's name states its property; docs/equivalence.md explains
each tolerance. Every property draws partial windows (k greater than the micro-batches
given, closed early) and models that use a parameter twice (``ModelSpec.tie``).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, find, given, note
from hypothesis import strategies as st

from minitorch_accum import kernels, optim
from minitorch_accum.accum import Accumulator
from minitorch_accum.nn import Linear
from minitorch_accum.nn import functional as F
from minitorch_accum.testing import Case, ModelSpec, run_full_batch, run_window
from minitorch_accum.testing.accumulation_strategies import TIES, cases, model_specs, spare_steps, splits
from minitorch_accum.testing.rounding import rounding_bound


def kernel_paths() -> list[str]:
    """Every CPU kernel path this machine can run (the native module may be missing)."""
    return ["reference", "native", "emulated"] if kernels.native_available() else ["reference"]


def window_arrays(acc: Accumulator, model) -> dict[str, np.ndarray]:
    """The window's gradients by parameter name (names match across freshly built models)."""
    grads = acc.grads()
    return {name: np.asarray(grads[p], dtype=np.float64) for name, p in model.named_parameters() if p in grads}


def max_gap(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> float:
    return max(float(np.max(np.abs(a[k] - b[k]), initial=0.0)) for k in a)


# 1 -----------------------------------------------------------------------------------------
@given(cases(dtypes=("float64",), ties=TIES))
def test_window_grad_equals_full_batch_in_float64(case: Case) -> None:
    """float64: only summation order differs, so 1e-10 is thousands of times the observed gap."""
    model, acc = run_window(case)
    _, full = run_full_batch(case, model)
    window = window_arrays(acc, model)
    assert set(window) <= set(full)
    assert max_gap(window, full) <= 1e-10


@given(cases(dtypes=("float32", "bfloat16"), max_items=16, layer_norm=False, ties=TIES))
def test_window_grad_is_within_the_rounding_bound_in_float32_and_bf16(case: Case) -> None:
    """Tolerance: the running error analysis of ``minitorch_accum.testing.rounding`` (Higham's
    gamma_n bounds for every sum, first-order propagation, the window's k additions and its
    scaling), evaluated for this case's weights and data; derived, never tuned."""
    model, acc = run_window(case)
    _, full = run_full_batch(case, model)
    window = window_arrays(acc, model)
    bound = rounding_bound(case, model)
    for key, values in window.items():
        gap = np.abs(values - full[key])
        note(f"worst gap/bound: {np.max(gap / (bound[key] + 1e-300)):.3g}")
        assert np.all(gap <= bound[key] + 1e-30)


# 2 -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("make_optimizer", [lambda: optim.SGD(0.1, momentum=0.9, nesterov=True),
                                            lambda: optim.AdamW(lr=0.01, weight_decay=0.1)],
                         ids=["sgd-momentum", "adamw"])
@given(spec=model_specs(ties=TIES), k=st.integers(1, 5), b=st.integers(1, 6), steps=st.integers(1, 3),
       fusion=st.sampled_from(["leaf", "gemm", "none"]), spare=spare_steps())
def test_parameters_after_n_steps_equal_between_k_x_b_and_k_times_b(make_optimizer, spec: ModelSpec, k: int, b: int,
                                                                     steps: int, fusion: str, spare: int) -> None:
    """k x b and k*b through the Accumulator (each window ``spare`` micro-batches short of
    its k when spare > 0), and k*b through a plain backward() with no accumulator at all
    (the independent reference), end at the same parameters."""
    results = []
    for micro, windows in ((b, k), (k * b, 1)):
        case = Case(model=spec, sizes=(micro,) * windows, fusion=fusion, steps=windows + spare)
        model = spec.build("float64")
        opt = make_optimizer()
        acc = Accumulator(model, steps=case.window_steps, fusion=fusion, accum_dtype="float64")
        for step in range(steps):
            run_window(case.with_(data_seed=step), model, accumulator=acc)
            opt.step(model, acc)
            acc.zero()
        results.append([p.numpy() for p in model.parameters()])
    model = spec.build("float64")
    opt = make_optimizer()
    for step in range(steps):
        case = Case(model=spec, sizes=(k * b,), data_seed=step)
        x, y = case.batch()
        opt.step(model, F.cross_entropy(model(case.inputs(x)), y).backward())
    results.append([p.numpy() for p in model.parameters()])
    for accumulated, big, plain in zip(*results, strict=True):
        np.testing.assert_allclose(accumulated, plain, rtol=0, atol=1e-10)
        np.testing.assert_allclose(big, plain, rtol=0, atol=1e-10)


# 3 -----------------------------------------------------------------------------------------
@given(case=cases(ties=TIES), data=st.data())
def test_the_order_of_micro_batches_does_not_matter(case: Case, data: st.DataObject) -> None:
    order = data.draw(st.permutations(range(len(case.sizes))))
    model, acc = run_window(case)
    forward = window_arrays(acc, model)
    model, acc = run_window(case, order=list(order))
    assert max_gap(forward, window_arrays(acc, model)) <= 1e-12


# 4 -----------------------------------------------------------------------------------------
@given(case=cases(ties=TIES), data=st.data())
def test_splitting_a_micro_batch_further_changes_nothing(case: Case, data: st.DataObject) -> None:
    index = data.draw(st.integers(0, len(case.sizes) - 1))
    assume(case.sizes[index] > 1)
    cut = data.draw(st.integers(1, case.sizes[index] - 1))
    finer = case.with_(sizes=(*case.sizes[:index], cut, case.sizes[index] - cut, *case.sizes[index + 1:]),
                       steps=None if case.steps is None else case.steps + 1)
    model, acc = run_window(case)
    coarse = window_arrays(acc, model)
    model, acc = run_window(finer)
    assert max_gap(coarse, window_arrays(acc, model)) <= 1e-12


# 5 -----------------------------------------------------------------------------------------
@given(spec=model_specs(kinds=("mlp",), ties=TIES), sizes=splits(max_items=20),
       fusion=st.sampled_from(["leaf", "gemm", "none"]), spare=spare_steps())
def test_mean_differs_from_items_exactly_when_sizes_differ(spec: ModelSpec, sizes: tuple[int, ...],
                                                           fusion: str, spare: int) -> None:
    """mean of micro-batch means = sum_j G_j / (k n_j); the exact window gradient is
    sum_j G_j / N; the gap is sum_j (1/(k n_j) - 1/N) G_j, zero when all n_j are equal.
    k and N count what the window holds: a partial window divides by its own micro-batches
    and items, not by the Accumulator's k."""
    items_case = Case(model=spec, sizes=sizes, reduction="items", fusion=fusion, steps=len(sizes) + spare)
    model, acc = run_window(items_case)
    exact = window_arrays(acc, model)
    model, acc = run_window(items_case.with_(reduction="mean"))
    mean = window_arrays(acc, model)
    x, y = items_case.batch()
    k, n = len(sizes), sum(sizes)
    predicted: dict[str, np.ndarray] = {name: 0.0 for name, _ in model.named_parameters()}
    for part, n_j in zip(items_case.slices(), sizes, strict=True):
        grads = items_case.loss(model, x[part], y[part], "sum").backward()
        for name, p in model.named_parameters():
            predicted[name] = predicted[name] + (1 / (k * n_j) - 1 / n) * np.asarray(grads[p])
    gap = {key: mean[key] - exact[key] for key in exact}
    assert max_gap(gap, predicted) <= 1e-12
    if len(set(sizes)) == 1:
        assert max_gap(mean, exact) <= 1e-12


# 6 -----------------------------------------------------------------------------------------
@given(sizes=splits(min_items=4, max_items=16, max_parts=4), seed=st.integers(0, 1000), tie=st.sampled_from(TIES),
       spare=spare_steps())
def test_batch_norm_breaks_equivalence_and_says_by_how_much(sizes: tuple[int, ...], seed: int, tie: str,
                                                            spare: int) -> None:
    """Batch statistics come from each micro-batch, not the window: the gradients differ unless
    the window is one micro-batch. In evaluation mode (running statistics) BN is per item and
    equivalence holds again."""
    assume(min(sizes) >= 2)  # training-mode BN needs two items per micro-batch
    spec = ModelSpec(widths=(4, 6, 3), batch_norm=True, activation="tanh", seed=seed, tie=tie)
    case = Case(model=spec, sizes=sizes, data_seed=seed, steps=len(sizes) + spare)
    model, acc = run_window(case)
    window = window_arrays(acc, model)
    _, full = run_full_batch(case, model)
    scale = max(float(np.max(np.abs(v))) for v in full.values())
    relative = max_gap(window, full) / scale
    note(f"BatchNorm: max |window - full| / max |full| = {relative:.3g} with sizes {sizes}")
    if len(sizes) == 1:
        assert relative <= 1e-12
    else:
        assert relative > 1e-6
    model.eval()
    model, acc = run_window(case, model=model)
    _, full = run_full_batch(case, model)
    assert max_gap(window_arrays(acc, model), full) <= 1e-10


# 7 -----------------------------------------------------------------------------------------
@given(case=cases(kinds=("mlp",), ties=TIES), data=st.data(), value=st.sampled_from([np.inf, -np.inf, np.nan]))
def test_a_nonfinite_gradient_in_any_micro_batch_skips_the_step(case: Case, data: st.DataObject, value: float) -> None:
    bad = data.draw(st.integers(0, case.items - 1))
    model = case.model.build(case.dtype)
    before = [p.numpy() for p in model.parameters()]
    x, y = case.batch()
    x[bad, 0] = value
    acc = case.accumulator(model)
    for part in case.slices():
        acc.backward(case.loss(model, x[part], y[part], "sum"), num_items=F.count_items(y[part]))
    opt = optim.AdamW(lr=0.1)
    opt.step(model, acc)
    assert acc.found_nonfinite() and opt.skipped_steps == 1
    for p, old in zip(model.parameters(), before, strict=True):
        np.testing.assert_array_equal(p.numpy(), old)


# 8 -----------------------------------------------------------------------------------------
@given(case=cases(dtypes=("float64", "float32"), ties=TIES), data=st.data())
def test_checkpoint_and_resume_mid_window_equals_the_uninterrupted_window(case: Case, data: st.DataObject) -> None:
    stop = data.draw(st.integers(0, len(case.sizes)))
    model, acc = run_window(case)
    uninterrupted = window_arrays(acc, model)

    model = case.model.build(case.dtype)
    acc = case.accumulator(model)
    run_window(case, model, order=list(range(stop)), accumulator=acc)
    state, record = acc.state_dict(), model.to_record()
    fresh = case.model.build(case.dtype)
    fresh.load_record(record)
    resumed = case.accumulator(fresh)
    resumed.load_state_dict(state)
    run_window(case, fresh, order=list(range(stop, len(case.sizes))), accumulator=resumed)
    for a, b in zip(uninterrupted.values(), window_arrays(resumed, fresh).values(), strict=True):
        np.testing.assert_array_equal(a, b)


# 9 -----------------------------------------------------------------------------------------
@given(cases(dtypes=("float64", "float32"), fusions=("leaf",), layer_norm=False, ties=TIES))
def test_every_fusion_mode_and_kernel_path_gives_the_same_window_gradient(case: Case) -> None:
    """Fusion modes differ in summation order only (1e-12 in float64, the rounding bound in
    float32); the kernel paths run the same arithmetic and must agree bit for bit."""
    results = {}
    for fusion in ("leaf", "gemm", "none"):
        for path in kernel_paths():
            with kernels.use_path(path):
                model, acc = run_window(case.with_(fusion=fusion, compensated=case.compensated and fusion != "none"))
                results[fusion, path] = list(window_arrays(acc, model).values())
    for fusion in ("leaf", "gemm", "none"):
        baseline = results[fusion, "reference"]
        for path in kernel_paths():
            for a, b in zip(baseline, results[fusion, path], strict=True):
                np.testing.assert_array_equal(a, b, err_msg=f"{fusion} on {path}")
    tolerance = 1e-12 if case.dtype == "float64" else None
    model = case.model.build(case.dtype)
    bound = list(rounding_bound(case, model).values()) if tolerance is None else None  # model order
    for fusion in ("gemm", "none"):
        for i, (a, b) in enumerate(zip(results["leaf", "reference"], results[fusion, "reference"], strict=True)):
            limit = tolerance if tolerance is not None else bound[i]
            assert np.all(np.abs(a - b) <= limit + 1e-30), fusion


# the strategies themselves ----------------------------------------------------------------
@pytest.mark.parametrize("tie", ["reuse", "share"])
def test_the_strategies_draw_partial_windows_and_models_that_use_a_parameter_twice(tie: str) -> None:
    """The properties above are only as strong as what they draw: a tied spec must build a
    model that really uses one Param twice, and a partial case must leave its window short."""
    spec = find(model_specs(ties=TIES), lambda s: s.tie == tie)
    model = spec.build("float64")
    linears = [layer for layer in model if isinstance(layer, Linear)]
    weights = [id(layer.weight) for layer in linears]
    assert len(weights) - len(set(weights)) == 1  # one weight Param, two uses
    assert (linears[0] is linears[1]) == (tie == "reuse")
    assert len(list(model.named_parameters())) == len({id(p) for p in model.parameters()})
    case = find(cases(ties=TIES), lambda c: c.partial and c.model.tie == tie)
    model, acc = run_window(case)
    assert acc.micro_step == len(case.sizes) < acc.steps == case.window_steps and not acc.is_boundary
    assert not find(cases(partial=False), lambda c: True).partial
