"""The memo of listed calls on a device (kernels/list_memo.py), run on the emulated path, which
plans launches as the CUDA path does: the same arrays skip the checks and the tables, and any
change the checks would see sends the call through them again."""

from __future__ import annotations

import gc
import warnings
import weakref

import numpy as np
import pytest

import minitorch_accum.kernels as K
from minitorch_accum.kernels import accumulate, reference
from minitorch_accum.kernels.dispatch import use_path
from minitorch_accum.kernels.launch import plan
from minitorch_accum.kernels.list_memo import ListMemo, Remembered


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Each check of a listed call on a device, in order; a fresh memo for the test."""
    seen: list[str] = []
    real = accumulate.check_accumulate

    def check(kernel: str, *args: object, **kwargs: object) -> object:
        seen.append(kernel)
        return real(kernel, *args, **kwargs)  # type: ignore[arg-type]

    real_device = accumulate.call_device

    def device(kernel: str, *args: object, **kwargs: object) -> str:
        seen.append(f"device of {kernel}")
        return real_device(kernel, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(accumulate, "check_accumulate", check)
    monkeypatch.setattr(accumulate, "call_device", device)
    monkeypatch.setattr(accumulate, "_LISTS", ListMemo())
    return seen


def _checks(seen: list[str]) -> list[str]:
    return [kernel for kernel in seen if not kernel.startswith("device of ")]


def _lists(rng: np.random.Generator, sizes: tuple[int, ...] = (70_000, 3, 500)) -> tuple[list[np.ndarray], ...]:
    accs = [rng.standard_normal(n).astype(np.float32) for n in sizes]
    gs = [rng.standard_normal(n).astype(np.float32) for n in sizes]
    return accs, gs


def _expected(accs: list[np.ndarray], gs: list[np.ndarray], scale: float, times: int) -> list[np.ndarray]:
    out = [a.copy() for a in accs]
    for _ in range(times):
        for a, g in zip(out, gs, strict=True):
            reference.add_scale(a, g, scale)
    return out


def test_the_same_lists_are_checked_once_and_summed_every_time(counted: list[str]) -> None:
    accs, gs = _lists(np.random.default_rng(0))
    expected = _expected(accs, gs, 0.5, 3)
    with use_path("emulated"):
        for _ in range(3):
            K.multi_add_scale(accs, gs, 0.5)
    assert counted == ["device of multi_add_scale", "multi_add_scale"]  # the device, too, is remembered
    for got, want in zip(accs, expected, strict=True):
        np.testing.assert_array_equal(got, want)


def test_another_kernel_or_order_or_flag_is_checked_on_its_own(counted: list[str]) -> None:
    accs, gs = _lists(np.random.default_rng(1))
    flag = K.new_flag(accs[0])
    with use_path("emulated"):
        K.multi_add_scale(accs, gs, 1.0)
        K.multi_copy_scale(accs, gs, 1.0)
        K.multi_add_scale(accs[::-1], gs[::-1], 1.0)
        K.multi_add_scale(accs, gs, 1.0, flag)
        K.multi_add_scale(accs[:2], gs[:2], 1.0)
    assert _checks(counted) == ["multi_add_scale", "multi_copy_scale", "multi_add_scale", "multi_add_scale",
                                "multi_add_scale"]


def test_a_read_only_accumulator_is_refused_on_the_next_call(counted: list[str]) -> None:
    accs, gs = _lists(np.random.default_rng(2))
    with use_path("emulated"):
        K.multi_add_scale(accs, gs, 1.0)
        gs[1].flags.writeable = False  # a gradient is only read: the call stays remembered
        K.multi_add_scale(accs, gs, 1.0)
        assert len(_checks(counted)) == 1
        accs[2].flags.writeable = False
        before = accs[2].copy()
        with pytest.raises(ValueError, match=r"accs\[2\].*read-only"):
            K.multi_add_scale(accs, gs, 1.0)
    np.testing.assert_array_equal(accs[2], before)


def test_a_flagged_call_is_remembered_with_its_flag(counted: list[str]) -> None:
    accs, gs = _lists(np.random.default_rng(9))
    flag = K.new_flag(accs[0])
    with use_path("emulated"):
        K.multi_add_scale(accs, gs, 1.0, flag)
        K.multi_add_scale(accs, gs, 1.0, flag)
        assert len(_checks(counted)) == 1
        flag.flags.writeable = False  # the kernel writes the flag: checked again, and refused
        with pytest.raises(ValueError, match=r"flag .* is read-only"):
            K.multi_add_scale(accs, gs, 1.0, flag)
        with pytest.raises(TypeError, match=r"flag .* must be an int32 array"):
            K.multi_add_scale(accs, gs, 1.0, np.zeros(1, np.float32))
    assert flag[0] == 0


def test_the_same_arrays_in_other_lists_are_checked_again(counted: list[str]) -> None:
    rng = np.random.default_rng(10)
    accs, gs = _lists(rng, (6, 6))
    with use_path("emulated"):
        K.multi_add_scale(accs, gs, 1.0)
        with pytest.raises(ValueError, match="accs and gs must have the same length, got 3 and 1"):
            K.multi_add_scale([*accs, gs[0]], gs[1:], 1.0)


def test_a_dtype_changed_in_place_is_refused_on_the_next_call(counted: list[str]) -> None:
    accs, gs = _lists(np.random.default_rng(3), (8, 4))
    with use_path("emulated"):
        K.multi_add_scale(accs, gs, 1.0)
        gs[0].dtype = np.int32  # same bytes and shape, read as integers: no pair takes them
        with pytest.raises(TypeError, match=r"unsupported dtypes .*gs\[0\]"):
            K.multi_add_scale(accs, gs, 1.0)
    assert len(_checks(counted)) == 2


def test_strides_changed_in_place_are_refused_on_the_next_call(counted: list[str]) -> None:
    base = np.zeros(12, np.float32)
    accs, gs = [base[:6]], [np.ones(6, np.float32)]
    with use_path("emulated"):
        K.multi_add_scale(accs, gs, 1.0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # NumPy 2.4 deprecates it, still does it
            try:
                accs[0].strides = (8,)  # every other element of base: no longer contiguous
            except (AttributeError, TypeError):
                pytest.skip("this NumPy no longer sets strides in place")
        with pytest.raises(ValueError, match=r"accs\[0\].*C-contiguous"):
            K.multi_add_scale(accs, gs, 1.0)
    np.testing.assert_array_equal(base, [1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0])


def test_a_shape_changed_in_place_is_checked_again_and_still_sums(counted: list[str]) -> None:
    accs, gs = _lists(np.random.default_rng(4), (12, 6))
    expected = _expected(accs, gs, 2.0, 2)
    with use_path("emulated"):
        K.multi_add_scale(accs, gs, 2.0)
        accs[0].shape = (3, 4)
        K.multi_add_scale(accs, gs, 2.0)
    assert len(_checks(counted)) == 2
    np.testing.assert_array_equal(accs[0].ravel(), expected[0])


def test_new_arrays_where_freed_ones_were_are_checked(counted: list[str]) -> None:
    accs, gs = _lists(np.random.default_rng(5), (16, 16))
    with use_path("emulated"):
        K.multi_add_scale(accs, gs, 1.0)
        del accs, gs
        gc.collect()
        # same sizes, a float64 accumulator summing float16: a pair no kernel takes
        accs = [np.zeros(16, np.float64) for _ in range(2)]
        gs = [np.zeros(16, np.float16) for _ in range(2)]
        with pytest.raises(TypeError, match="unsupported dtypes"):
            K.multi_add_scale(accs, gs, 1.0)
    assert len(_checks(counted)) == 2


def test_new_views_in_place_of_freed_ones_sum_into_their_own_memory(counted: list[str]) -> None:
    # The freed views' ids are often handed to the next views made; their tables would point into
    # the old buffer, which stays allocated here, so a reused plan would write there silently.
    old, new = np.zeros(32, np.float32), np.zeros(32, np.float32)
    gs = [np.ones(16, np.float32), np.ones(16, np.float32)]
    with use_path("emulated"):
        accs = [old[:16], old[16:]]
        K.multi_add_scale(accs, gs, 1.0)
        first = [id(a) for a in accs]
        del accs
        accs = [new[:16], new[16:]]
        reused = [id(a) for a in accs] == first
        K.multi_add_scale(accs, gs, 1.0)
    np.testing.assert_array_equal(old, np.ones(32))
    np.testing.assert_array_equal(new, np.ones(32))
    assert len(_checks(counted)) == 2, f"ids reused: {reused}"


def test_a_remembered_list_keeps_no_array_alive(counted: list[str]) -> None:
    accs, gs = _lists(np.random.default_rng(6))
    watched = weakref.ref(accs[0])
    with use_path("emulated"):
        K.multi_add_scale(accs, gs, 1.0)
    assert len(accumulate._LISTS) == 1
    del accs, gs
    gc.collect()
    assert watched() is None


def test_other_table_limits_plan_again(counted: list[str]) -> None:
    accs, gs = _lists(np.random.default_rng(7), (70_000, 5, 300))
    expected = _expected(accs, gs, 0.25, 2)
    with use_path("emulated"):
        K.multi_add_scale(accs, gs, 0.25)
        with plan.table_limits(max_tensors=1, max_blocks=1):
            K.multi_add_scale(accs, gs, 0.25)
    assert len(_checks(counted)) == 2
    for got, want in zip(accs, expected, strict=True):
        np.testing.assert_array_equal(got, want)


def test_the_host_module_is_never_bypassed(counted: list[str]) -> None:
    accs, gs = _lists(np.random.default_rng(8))
    with use_path("emulated"):
        K.multi_add_scale(accs, gs, 1.0)
    with use_path("reference"), pytest.MonkeyPatch.context() as patch:
        ran: list[str] = []
        real = reference.multi_add_scale

        def spy(*args: object) -> None:
            ran.append("reference")
            real(*args)  # type: ignore[arg-type]

        patch.setattr(reference, "multi_add_scale", spy)
        K.multi_add_scale(accs, gs, 1.0)
    assert ran == ["reference"]
    assert _checks(counted) == ["multi_add_scale"]


def test_the_memo_forgets_the_least_recent_list_beyond_its_capacity() -> None:
    memo = ListMemo(capacity=2)
    arrays = [[np.zeros(2, np.float32)] for _ in range(3)]
    for i, items in enumerate(arrays):
        memo.remember("k", None, (items,), (True,), None, Remembered("host", i))
    assert len(memo) == 2
    assert memo.find("k", None, (arrays[0],), (True,), None) is None
    found = memo.find("k", None, (arrays[1],), (True,), None)
    assert found is not None and found.value == 1
    memo.remember("k", None, (arrays[0],), (True,), None, Remembered("host", 0))
    assert memo.find("k", None, (arrays[2],), (True,), None) is None  # 1 was used more recently
    assert memo.find("k", None, (arrays[1],), (True,), None) is not None
    assert memo.find("k", "other settings", (arrays[1],), (True,), None) is None
    assert memo.find("k", None, ("not a list",), (True,), None) is None


def test_an_absent_list_does_not_hide_the_lists_after_it() -> None:
    memo = ListMemo()
    accs, gs = [np.zeros(4, np.float32)], [np.zeros(4, np.float32)]
    memo.remember("k", None, (accs, None, gs), (True, True, False), None, Remembered("host", "tables"))
    found = memo.find("k", None, (accs, None, gs), (True, True, False), None)
    assert found is not None and found.value == "tables"
    gs[0].dtype = np.int32
    assert memo.find("k", None, (accs, None, gs), (True, True, False), None) is None
