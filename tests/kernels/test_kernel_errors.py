"""Errors are part of the API: every path raises the same exception type, and
the message names the kernel, the arguments' shapes and dtypes."""

from __future__ import annotations

import re

import numpy as np
import pytest

import minitorch_accum.kernels as K
from minitorch_accum.kernels import dispatch
from minitorch_accum.kernels.dtypes import BFLOAT16
from tests.kernels.kernel_cases import CPU_PATHS, on_path


@pytest.mark.parametrize("path", CPU_PATHS)
def test_size_mismatch_names_kernel_shapes_and_dtypes(path):
    with on_path(path), pytest.raises(ValueError) as info:
        K.add_scale(np.zeros((2, 3), np.float32), np.zeros(7, BFLOAT16), 1.0)
    message = str(info.value)
    for part in ("add_scale", "acc (shape (2, 3), float32)", "g (shape (7,), bfloat16)", "number of elements"):
        assert part in message


@pytest.mark.parametrize("path", CPU_PATHS)
def test_unsupported_pair_lists_the_supported_ones(path):
    with (
        on_path(path),
        pytest.raises(
            TypeError,
            match=r"copy_scale: unsupported dtypes acc \(shape \(3,\), "
            r"float16\) with g \(shape \(3,\), float32\); supported",
        ),
    ):
        K.copy_scale(np.zeros(3, np.float16), np.zeros(3, np.float32), 1.0)


@pytest.mark.parametrize("path", CPU_PATHS)
def test_layout_errors(path):
    acc = np.zeros((4, 4), np.float32)
    with on_path(path):
        with pytest.raises(ValueError, match=r"add_scale: acc \(shape \(4, 2\), float32\) must be C-contiguous"):
            K.add_scale(acc[:, ::2], np.zeros(8, np.float32), 1.0)
        frozen = np.zeros(3, np.float32)
        frozen.flags.writeable = False
        with pytest.raises(ValueError, match="is read-only"):
            K.add_scale(frozen, np.zeros(3, np.float32), 1.0)
        with pytest.raises(TypeError, match=r"add_scale_compensated: comp \(shape \(3,\), float64\) must have"):
            K.add_scale_compensated(np.zeros(3, np.float32), np.zeros(3), np.zeros(3, np.float32), 1.0)
        with pytest.raises(TypeError, match=r"flag .* must be an int32 array"):
            K.add_scale(np.zeros(3, np.float32), np.zeros(3, np.float32), 1.0, flag=np.zeros(1))


@pytest.mark.parametrize("path", CPU_PATHS)
def test_cast_add_scale_wants_a_low_precision_gradient(path):
    with on_path(path), pytest.raises(TypeError, match=r"cast_add_scale: g .* must be float16 or bfloat16"):
        K.cast_add_scale(np.zeros(3, np.float32), np.zeros(3, np.float32), 1.0)


@pytest.mark.parametrize("path", CPU_PATHS)
def test_list_errors_name_the_item(path):
    accs = [np.zeros(2, np.float32), np.zeros(3, np.float32)]
    with on_path(path):
        with pytest.raises(ValueError, match="multi_add_scale: accs and gs must have the same length, got 2 and 1"):
            K.multi_add_scale(accs, [np.zeros(2, np.float32)], 1.0)
        with pytest.raises(ValueError, match=r"multi_add_scale: accs\[1\] \(shape \(3,\), float32\) and gs\[1\]"):
            K.multi_add_scale(accs, [np.zeros(2, np.float32), np.zeros(4, np.float32)], 1.0)
        with pytest.raises(TypeError, match="multi_l2_norm: unsupported dtype tensors\\[0\\]"):
            K.multi_l2_norm([np.zeros(3, np.int64)])


def _adam(p, g, m, v, **changes):
    settings = dict(lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.0, step=1) | changes
    K.adamw_step(p, g, m, v, **settings)


@pytest.mark.parametrize("path", CPU_PATHS)
def test_optimizer_errors(path):
    p32 = np.zeros(4, np.float32)
    with on_path(path):
        with pytest.raises(TypeError, match=r"adamw_step: param \(shape \(4,\), float32\) and grad .* float64"):
            _adam(p32, np.zeros(4), p32.copy(), p32.copy())
        with pytest.raises(ValueError, match=r"exp_avg_sq .* must have the same number of elements"):
            _adam(p32, p32.copy(), p32.copy(), np.zeros(5, np.float32))
        with pytest.raises(ValueError, match="step counts from 1"):
            _adam(p32, p32.copy(), p32.copy(), p32.copy(), step=0)
        with pytest.raises(ValueError, match="nesterov needs momentum"):
            K.sgd_momentum_step(p32, p32.copy(), p32.copy(), lr=0.1, momentum=0.0, nesterov=True)


class _FakeDevice:
    id = 0


class _FakeCupyArray:
    """Looks like a CuPy array to the dispatcher without needing CuPy."""

    __module__ = "cupy._core.core"
    __cuda_array_interface__ = None
    device = _FakeDevice()
    dtype = np.dtype(np.float32)
    shape = (3,)


def test_mixing_numpy_and_cupy_names_both_devices():
    with pytest.raises(TypeError, match=r"add_scale: g is on cuda:0 \(CuPy\) but acc is on the host \(NumPy\)"):
        K.add_scale(np.zeros(3, np.float32), _FakeCupyArray(), 1.0)
    with pytest.raises(TypeError, match=r"multi_add_scale: gs\[1\] is on cuda:0 \(CuPy\) but accs\[0\]"):
        K.multi_add_scale([np.zeros(3, np.float32)] * 2, [np.zeros(3, np.float32), _FakeCupyArray()], 1.0)
    with pytest.raises(TypeError, match="add_scale: g must be a NumPy or CuPy array, got list"):
        K.add_scale(np.zeros(3, np.float32), [1.0, 2.0, 3.0], 1.0)


def test_kernel_path_comes_from_the_environment(monkeypatch):
    monkeypatch.delenv("MTA_KERNELS", raising=False)
    assert K.kernel_path() == "native"
    for path in ("reference", "native", "emulated"):
        monkeypatch.setenv("MTA_KERNELS", path)
        assert K.kernel_path() == path
    monkeypatch.setenv("MTA_KERNELS", "fast")
    with pytest.raises(
        ValueError, match="MTA_KERNELS='fast' is not a kernel path; choose one of reference, native, emulated"
    ):
        K.kernel_path()
    with K.use_path("emulated"):
        assert K.kernel_path() == "emulated"
        with K.use_path("reference"):
            assert K.kernel_path() == "reference"
        assert K.kernel_path() == "emulated"
    with pytest.raises(ValueError, match="not a kernel path"), K.use_path("gpu"):
        pass


def test_missing_extension_falls_back_to_reference_with_one_warning(monkeypatch):
    monkeypatch.delenv("MTA_KERNELS", raising=False)
    monkeypatch.setattr(dispatch, "_native_module", None)
    monkeypatch.setattr(dispatch, "_native_import_error", ImportError("no compiler"))
    monkeypatch.setattr(dispatch, "_warned_missing", False)
    assert not K.native_available()
    assert K.kernel_path() == "reference"
    acc = np.zeros(3, np.float32)
    with pytest.warns(K.NativeExtensionMissingWarning, match="no compiler"):
        K.add_scale(acc, np.ones(3, np.float32), 2.0)
    K.add_scale(acc, np.ones(3, np.float32), 2.0)  # no second warning (warnings are errors here)
    assert (acc == 4).all()
    with K.use_path("emulated"), pytest.raises(RuntimeError, match="needs the native extension"):
        K.add_scale(acc, np.ones(3, np.float32), 2.0)


def _error_on_every_path(call) -> tuple[type[BaseException], str]:
    """The exception ``call`` raises on each CPU path; asserts that type and message agree."""
    seen = {}
    for path in CPU_PATHS:
        with on_path(path), pytest.raises(Exception) as info:
            call()
        seen[path] = (info.type, str(info.value))
    assert len(set(seen.values())) == 1, seen
    return seen["reference"]


def test_big_endian_arrays_are_refused_alike_on_every_path():
    # the native module once read their bytes as native floats: garbage, and l2_norm gave 0.0
    swapped = np.full(3, 2.0, ">f4")
    acc = np.zeros(3, np.float32)
    cases = [
        (lambda: K.add_scale(acc, swapped, 1.0), r"add_scale: g \(shape \(3,\), >f4\) must be in native byte order"),
        (lambda: K.copy_scale(swapped, acc, 1.0), r"copy_scale: acc \(shape \(3,\), >f4\)"),
        (lambda: K.l2_norm(swapped), r"l2_norm: x \(shape \(3,\), >f4\) must be in native byte order"),
        (lambda: K.multi_l2_norm([acc, swapped]), r"multi_l2_norm: tensors\[1\] \(shape \(3,\), >f4\)"),
        (lambda: K.add_scale(acc, acc.copy(), 1.0, flag=np.zeros(1, ">i4")), r"flag \(shape \(1,\), >i4\)"),
        (lambda: _adam(swapped, swapped.copy(), swapped.copy(), swapped.copy()), r"adamw_step: param .* >f4"),
    ]
    for call, message in cases:
        kind, text = _error_on_every_path(call)
        assert kind is TypeError and re.search(message, text), text
        assert "native byte order" in text


def test_overlapping_arrays_are_refused_alike_on_every_path():
    buf = np.zeros(12, np.float32)
    acc, g = buf[1:10], buf[:9]  # g runs one element ahead of acc in the same memory
    other = np.zeros(9, np.float32)
    kind, text = _error_on_every_path(lambda: K.add_scale(acc, g, 1.0))
    assert kind is ValueError
    assert text == (
        "add_scale: acc (shape (9,), float32) and g (shape (9,), float32) share memory; "
        "an array the kernel writes must not overlap its other arrays"
    )
    cases = [
        (lambda: K.add_scale(other, other, 1.0), r"add_scale: acc .* and g .* share memory"),
        (lambda: K.add_scale_compensated(other, buf[3:12], buf[:9], 1.0), r"g .* and comp .* share memory"),
        (lambda: K.multi_add_scale([other, other], [acc, g], 1.0), r"accs\[0\] .* and accs\[1\] .* share memory"),
        (lambda: K.multi_add_scale([other, buf[:9]], [buf[3:12], g.copy()], 1.0), r"gs\[0\] .* and accs\[1\]"),
        (lambda: K.copy_scale(buf[:4], other[:4], 1.0, flag=buf[2:3].view(np.int32)), r"acc .* and flag .*"),
        (lambda: _adam(other, g.copy(), other[::-1].copy(), other), r"adamw_step: param .* and exp_avg_sq .*"),
        (
            lambda: K.multi_sgd_momentum_step([acc], [other], [g], lr=0.1, momentum=0.9),
            r"multi_sgd_momentum_step: params\[0\] .* and momentum_bufs\[0\] .* share memory",
        ),
    ]
    for call, message in cases:
        kind, text = _error_on_every_path(call)
        assert kind is ValueError and re.search(message, text), text


def test_arrays_that_are_only_read_may_share_memory():
    g = np.ones(5, np.float32)
    for path in CPU_PATHS:
        accs = [np.zeros(5, np.float32), np.zeros(5, np.float32)]
        buf = np.zeros(10, np.float32)
        with on_path(path):
            K.multi_add_scale(accs, [g, g], 2.0)  # one gradient into two accumulators
            K.add_scale(buf[:5], buf[5:], 1.0)  # neighbours in one buffer, no shared byte
            K.add_scale_compensated(buf[:5], np.zeros(5, np.float32), buf[5:], 1.0)
        assert (accs[0] == 2).all() and (accs[1] == 2).all()


def test_none_arguments_raise_the_same_type_error_on_every_path():
    acc, g = np.zeros(3, np.float32), np.ones(3, np.float32)
    cases = [
        (lambda: K.add_scale(None, g, 1.0), "add_scale: acc must be a NumPy or CuPy array, got NoneType"),
        (lambda: K.add_scale(acc, None, 1.0), "add_scale: g must be a NumPy or CuPy array, got NoneType"),
        (lambda: K.add_scale(acc, g, None), "add_scale: scale must be a real number, got NoneType"),
        (
            lambda: K.add_scale_compensated(acc, None, g, 1.0),
            "add_scale_compensated: comp must be a NumPy or CuPy array, got NoneType",
        ),
        (lambda: K.multi_copy_scale([acc, None], [g, g], 1.0), "multi_copy_scale: accs[1] must be a NumPy"),
        (lambda: K.multi_add_scale(None, [g], 1.0), "multi_add_scale: accs must be a list or tuple of arrays"),
        (lambda: K.l2_norm(None), "l2_norm: x must be a NumPy or CuPy array, got NoneType"),
        (lambda: K.multi_l2_norm([g, None]), "multi_l2_norm: tensors[1] must be a NumPy or CuPy array"),
        (lambda: _adam(acc, g, None, acc.copy()), "adamw_step: exp_avg must be a NumPy or CuPy array, got NoneType"),
        (lambda: _adam(acc, g, acc.copy(), g.copy(), lr=None), "adamw_step: lr must be a real number, got NoneType"),
        (
            lambda: K.multi_adamw_step(
                [acc], [g], [None], [acc.copy()], lr=1e-3, beta1=0.9, beta2=0.99, eps=1e-8, weight_decay=0.0, step=1
            ),
            "multi_adamw_step: exp_avgs[0] must be a NumPy or CuPy array, got NoneType",
        ),
    ]
    for call, message in cases:
        kind, text = _error_on_every_path(call)
        assert kind is TypeError and text.startswith(message), text


def test_adam_refuses_betas_outside_0_1_and_a_non_integer_step():
    p, g, m, v = (np.zeros(4, np.float32) for _ in range(4))
    for changes, kind, message in [
        ({"beta1": 1.0}, ValueError, "adamw_step: beta1 must be in [0, 1), got 1.0"),  # bias correction 1 - 1^t = 0
        ({"beta1": -0.1}, ValueError, "adamw_step: beta1 must be in [0, 1), got -0.1"),
        ({"beta2": 1.5}, ValueError, "adamw_step: beta2 must be in [0, 1), got 1.5"),
        ({"beta2": float("nan")}, ValueError, "adamw_step: beta2 must be in [0, 1), got nan"),
        ({"step": 1.5}, TypeError, "adamw_step: step must be an integer (the step count, from 1), got 1.5"),
        ({"step": 2.0}, TypeError, "adamw_step: step must be an integer"),
        ({"step": True}, TypeError, "adamw_step: step must be an integer"),
        ({"step": "3"}, TypeError, "adamw_step: step must be an integer"),
    ]:
        raised, text = _error_on_every_path(lambda changes=changes: _adam(p, g, m, v, **changes))
        assert raised is kind and text.startswith(message), text
    with pytest.raises(ValueError, match=r"multi_adamw_step: beta1 must be in \[0, 1\)"):
        K.multi_adamw_step([p], [g], [m], [v], lr=1e-3, beta1=1, beta2=0.9, eps=1e-8, weight_decay=0, step=1)
    _adam(p, g, m, v, step=np.int64(7), beta1=0.0)  # NumPy integers count; beta 0 is allowed


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_optimizer_steps_refuse_a_non_finite_scalar_on_every_path(bad: float) -> None:
    # a NaN rate, decay or momentum turned every parameter into NaN while a NaN beta2 was refused
    p, g, m, v = (np.ones(4, np.float32) for _ in range(4))
    adam = {name: dict(lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.01, step=1) | {name: bad}
            for name in ("lr", "eps", "weight_decay")}
    sgd = {name: dict(lr=0.1, momentum=0.9, dampening=0.0, weight_decay=0.01) | {name: bad}
           for name in ("lr", "momentum", "dampening", "weight_decay")}
    calls = [(f"adamw_step: {name}", lambda s=s: K.adamw_step(p, g, m, v, **s)) for name, s in adam.items()]
    calls += [(f"multi_adamw_step: {name}", lambda s=s: K.multi_adamw_step([p], [g], [m], [v], **s))
              for name, s in adam.items()]
    calls += [(f"sgd_momentum_step: {name}", lambda s=s: K.sgd_momentum_step(p, g, m, **s)) for name, s in sgd.items()]
    calls += [(f"multi_sgd_momentum_step: {name}", lambda s=s: K.multi_sgd_momentum_step([p], [g], [m], **s))
              for name, s in sgd.items()]
    calls += [("adamw_step: grad_scale", lambda: K.adamw_step(p, g, m, v, lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8,
                                                              weight_decay=0.0, step=1, grad_scale=bad)),
              ("sgd_momentum_step: grad_scale", lambda: K.sgd_momentum_step(p, g, m, lr=0.1, momentum=0.9,
                                                                             grad_scale=bad))]
    for message, call in calls:
        kind, text = _error_on_every_path(call)
        assert kind is ValueError and text == f"{message} must be finite, got {bad!r}", text
    assert np.all(p == 1.0) and np.all(m == 1.0) and np.all(v == 1.0)  # nothing was written


def test_the_overlap_check_reads_the_bytes_a_strided_view_reaches() -> None:
    # spans from the strides, not nbytes from the first element: a broadcast view reaches fewer bytes,
    # a reversed one reaches bytes before its first element
    from minitorch_accum.kernels.validation import CallArrays

    base = np.zeros(1000)
    broadcast = np.broadcast_to(base[:120].reshape(3, 40), (5, 3, 40))  # 600 elements over 120 of memory
    after = base[200:305].reshape(5, 3, 7)  # past the 120, inside the 600
    reversed_ = base[100::-1][:80]  # base[100] down to base[21]
    before = base[:30]  # base[21:30] is inside it
    # Python's check (the reference and emulated paths, CuPy)
    calls = CallArrays("k")
    calls.add("a", broadcast, False)
    calls.add("out", after, True)
    calls.require_disjoint()
    calls = CallArrays("k")
    calls.add("a", reversed_, False)
    calls.add("out", before, True)
    with pytest.raises(ValueError, match=r"k: a \(shape \(80,\), float64\) and out \(shape \(30,\), float64\) share"):
        calls.require_disjoint()
    if not K.float32_gemm_available():
        return
    # the native module's: a stack with broadcast batch axes writes next to its operand
    base = np.zeros(1000, np.float32)
    broadcast = np.broadcast_to(base[:120].reshape(3, 40), (5, 3, 40))
    weights = np.broadcast_to(base[400:680].reshape(40, 7), (5, 40, 7))
    after = base[200:305].reshape(5, 3, 7)
    assert K.stacked_gemm(broadcast, weights, after)
    np.testing.assert_array_equal(after, 0.0)
    b = np.ones((3, 30, 4), np.float32)
    with pytest.raises(ValueError, match=r"stacked_gemm: a .* and out .* share memory"):
        K.stacked_gemm(base[120:30:-1].reshape(3, 1, 30), b, base[40:52].reshape(3, 1, 4))  # 40-51 in 31-120


def test_the_overlap_check_sees_one_shared_element_and_no_shared_byte() -> None:
    from minitorch_accum.kernels.validation import CallArrays

    def check(*arrays: tuple[str, np.ndarray, bool]) -> None:
        calls = CallArrays("k")
        for role, array, written in arrays:
            calls.add(role, array, written)
        calls.require_disjoint()

    buf = np.zeros(12, np.float32)
    with pytest.raises(ValueError, match=r"k: a .* and out .* share memory"):
        check(("a", buf[0:5], False), ("out", buf[4:9], True))  # buf[4] alone
    check(("a", buf[0:5], False), ("out", buf[5:10], True))  # neighbours, the written one after
    check(("out", buf[0:5], True), ("a", buf[5:10], False))  # neighbours, the written one first
    # two read arrays on the same bytes: the first of them is named (as the native module names it)
    with pytest.raises(ValueError, match=r"k: a \(shape \(5,\), float32\) and out .* share memory"):
        check(("a", buf[0:5], False), ("b", buf[0:5], False), ("out", buf[2:7], True))
    small = np.zeros(4, np.uint8)
    with pytest.raises(ValueError, match=r"share memory"):
        check(("a", small[0:2], False), ("out", small[1:3], True))  # one byte, at the end of a 1-byte stride
    for path in CPU_PATHS:  # the native module's spans agree
        with on_path(path):
            K.add_scale(buf[5:10], buf[0:5], 1.0)
            kind, text = _error_on_every_path(lambda: K.add_scale(buf[4:9], buf[0:5], 1.0))
            assert kind is ValueError and "share memory" in text
