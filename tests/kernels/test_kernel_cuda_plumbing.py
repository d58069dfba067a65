"""The CuPy path's Python side, run without a GPU: a stand-in ``cupy`` module
whose RawModule executes each launch on the CPU launch emulator. It checks
what CuPy would receive (compiler options, argument kinds and order, structs
passed by value as size-1 NumPy arrays, NULL pointers, device scratch arrays)
and that results match the reference. The real CuPy run is tests/gpu/test_kernel_cupy.py.
"""

from __future__ import annotations

import re
import sys
import types
from contextlib import contextmanager

import numpy as np
import pytest

import minitorch_accum.kernels as K
from minitorch_accum.kernels import reference
from minitorch_accum.kernels.dispatch import native
from minitorch_accum.kernels.dtypes import BFLOAT16, FLOAT32, FLOAT64
from minitorch_accum.kernels.launch import cuda_module
from tests.kernels.kernel_cases import array, assert_same_bits, copies, reference_step

pytestmark = pytest.mark.skipif(not K.native_available(), reason="needs the native extension")


class _Device:
    def __init__(self, device_id: int = 0) -> None:
        self.id = device_id
        self.attributes = {"MultiProcessorCount": 132}

    def __enter__(self) -> _Device:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


class _Pointer:
    def __init__(self, ptr: int) -> None:
        self.ptr = ptr


class _Flags:
    """CuPy's flags: the contiguity and ownership, and no ``writeable`` (a CuPy array is always)."""

    def __init__(self, host: np.ndarray) -> None:
        self.c_contiguous = host.flags.c_contiguous
        self.f_contiguous = host.flags.f_contiguous
        self.owndata = host.flags.owndata


class FakeCupyArray:
    """A host array dressed as a CuPy array."""

    def __init__(self, host: np.ndarray) -> None:
        self.host = host

    __cuda_array_interface__ = None
    device = _Device(0)
    dtype = property(lambda self: self.host.dtype)
    shape = property(lambda self: self.host.shape)
    strides = property(lambda self: self.host.strides)
    size = property(lambda self: self.host.size)
    flags = property(lambda self: _Flags(self.host))
    data = property(lambda self: _Pointer(self.host.__array_interface__["data"][0]))

    def __getitem__(self, index: object) -> FakeCupyArray:
        return FakeCupyArray(self.host[index])

    def get(self) -> np.ndarray:
        return self.host.copy()


FakeCupyArray.__module__ = "cupy"
launched: list[tuple[str, tuple, tuple, tuple]] = []


class _Function:
    def __init__(self, name: str) -> None:
        self.name = name

    def __call__(self, grid: tuple, block: tuple, args: tuple) -> None:
        launched.append((self.name, grid, block, args))
        converted = []
        for a in args:
            if isinstance(a, FakeCupyArray):
                converted.append(a.data.ptr)
            elif isinstance(a, np.ndarray):  # CuPy passes a size-1 NumPy array by value
                assert a.size == 1 and a.dtype.names, "only structs go by value"
                converted.append(a.tobytes())
            else:
                assert isinstance(a, np.generic), f"{self.name}: {type(a)} would not reach CUDA typed"
                converted.append(a)
        native().emulator_launch(self.name, grid, block, converted)


class _RawModule:
    def __init__(self, code: str, options: tuple[str, ...]) -> None:
        assert "--fmad=false" in options
        assert code.startswith("#line 1 ")
        self.code = code

    def get_function(self, name: str) -> _Function:
        assert re.search(rf"\b{name}\b", self.code), f"{name} is not in this source"
        return _Function(name)


@contextmanager
def _fake_cupy():
    module = types.ModuleType("cupy")
    module.RawModule = _RawModule
    module.cuda = types.SimpleNamespace(Device=_Device)
    module.int32 = np.int32
    module.empty = lambda n, dtype: FakeCupyArray(np.empty(n, dtype))
    module.zeros = lambda n, dtype: FakeCupyArray(np.zeros(n, dtype))
    saved = sys.modules.get("cupy")
    sys.modules["cupy"] = module
    caches = (cuda_module._modules, cuda_module._functions, cuda_module._sm_counts)
    cuda_module._modules, cuda_module._functions, cuda_module._sm_counts = {}, {}, {}
    launched.clear()
    try:
        yield module
    finally:
        cuda_module._modules, cuda_module._functions, cuda_module._sm_counts = caches
        if saved is None:
            del sys.modules["cupy"]
        else:
            sys.modules["cupy"] = saved


def _device(x: np.ndarray) -> FakeCupyArray:
    return FakeCupyArray(copies(x)[0])


def test_cuda_path_accumulates_with_typed_arguments_and_flag():
    rng = np.random.default_rng(0)
    acc, g = array(rng, 10_001, FLOAT32, 1), array(rng, 10_001, BFLOAT16, 1)
    d_acc, d_g = _device(acc), _device(g)
    with _fake_cupy():
        flag = K.new_flag(d_acc)
        assert isinstance(flag, FakeCupyArray) and flag.dtype == np.int32
        K.add_scale(d_acc, d_g, 0.3, flag=flag)
        name, grid, block, args = launched[-1]
        assert name == "mta_cast_add_scale_f32_bf16"
        assert block == (256, 1, 1) and 1 <= grid[0] <= 132 * 8
        assert [type(a) for a in args] == [FakeCupyArray, FakeCupyArray, np.uint64, np.float32, FakeCupyArray]
        K.copy_scale(d_acc, d_g, 0.3)  # no flag: a NULL pointer, 8 zero bytes
        assert launched[-1][3][-1] == np.uint64(0) and type(launched[-1][3][-1]) is np.uint64
    reference.add_scale(acc, g, 0.3)
    reference.copy_scale(acc, g, 0.3)
    assert_same_bits(d_acc.host, acc)
    assert flag.host[0] == 0


def test_cuda_path_multi_tensor_passes_the_table_by_value():
    rng = np.random.default_rng(1)
    pairs = [(FLOAT32, FLOAT32), (FLOAT64, FLOAT32), (FLOAT32, BFLOAT16)]
    accs = [array(rng, n, a) for n, (a, _) in zip((70_000, 3, 500), pairs, strict=True)]
    comps = [array(rng, acc.size, acc.dtype, magnitude=1e-7) for acc in accs]
    gs = [array(rng, n, g) for n, (_, g) in zip((70_000, 3, 500), pairs, strict=True)]
    d_accs, d_comps, d_gs = ([_device(x) for x in xs] for xs in (accs, comps, gs))
    with _fake_cupy():
        for _ in range(2):  # the second call over the same arrays is the remembered one
            K.multi_add_scale_compensated(d_accs, d_comps, d_gs, 2.5)
            name, grid, block, args = launched[-1]
            assert name == "mta_multi_add_scale_compensated" and grid == (4, 1, 1) and block == (512, 1, 1)
            table = args[0]
            assert isinstance(table, np.ndarray) and table.shape == (1,) and table.dtype.itemsize <= 4000
            assert type(args[1]) is np.float32 and type(args[2]) is np.float64
    for _ in range(2):
        for acc, comp, g in zip(accs, comps, gs, strict=True):
            reference.add_scale_compensated(acc, comp, g, 2.5)
    for d, h in zip(d_accs + d_comps, accs + comps, strict=True):
        assert_same_bits(d.host, h)


def test_cuda_path_names_the_array_on_another_device():
    rng = np.random.default_rng(4)
    acc, comp, g = (array(rng, 100, FLOAT32) for _ in range(3))
    d_acc, d_g = _device(acc), _device(g)
    with _fake_cupy():
        host_flag = np.zeros(1, np.int32)
        with pytest.raises(TypeError, match=r"add_scale: flag is on the host \(NumPy\) but acc is on cuda:0"):
            K.add_scale(d_acc, d_g, 1.0, flag=host_flag)
        with pytest.raises(TypeError, match=r"comps\[0\] is on the host \(NumPy\) but accs\[0\] is on cuda:0"):
            K.multi_add_scale_compensated([d_acc], [comp], [d_g], 1.0)
        with pytest.raises(TypeError, match=r"gs\[0\] is on the host \(NumPy\) but accs\[0\] is on cuda:0"):
            K.multi_add_scale_compensated([d_acc], [_device(comp)], [g], 1.0)
        K.multi_add_scale([d_acc], [d_g], 1.0)  # remembered without a flag; a host flag is another call
        with pytest.raises(TypeError, match=r"multi_add_scale: flag is on the host \(NumPy\) but accs\[0\]"):
            K.multi_add_scale([d_acc], [d_g], 1.0, flag=host_flag)
    np.testing.assert_array_equal(d_acc.host, acc + g)


def test_cuda_path_l2_norm_reduces_on_the_device_and_reads_one_value():
    rng = np.random.default_rng(2)
    xs = [array(rng, n, dtype) for n, dtype in ((200_000, FLOAT32), (17, FLOAT64))]
    with _fake_cupy():
        value = K.multi_l2_norm([_device(x) for x in xs])
        assert [step[0] for step in launched] == ["mta_multi_l2_norm_partials", "mta_l2_norm_finalize"]
    assert value == pytest.approx(reference.multi_l2_norm(xs), rel=1e-6)


def test_cuda_path_optimizer_steps_pass_scalars_structs():
    rng = np.random.default_rng(3)
    p, g, m = (array(rng, 1_000, FLOAT64) for _ in range(3))
    v = np.abs(array(rng, 1_000, FLOAT64))
    d = [_device(x) for x in (p, g, m, v)]
    with _fake_cupy():
        K.sgd_momentum_step(d[0], d[1], d[2], lr=0.1, momentum=0.9, nesterov=True, grad_scale=0.5)
        K.multi_adamw_step(
            [d[0]], [d[1]], [d[2]], [d[3]], lr=1e-3, beta1=0.9, beta2=0.99, eps=1e-8, weight_decay=0.1, step=3
        )
        assert [step[0] for step in launched] == ["mta_sgd_momentum_step_f64", "mta_multi_adamw_step_f64"]
        sgd_struct = launched[0][3][-1]
        assert sgd_struct.dtype.names[:2] == ("lr", "momentum") and sgd_struct["nesterov"][0] == 1
    reference_step("sgd_momentum_step", p, g, m, lr=0.1, momentum=0.9, nesterov=True, grad_scale=0.5)
    reference_step(
        "multi_adamw_step", [p], [g], [m], [v], lr=1e-3, beta1=0.9, beta2=0.99, eps=1e-8, weight_decay=0.1, step=3
    )
    for dev, host in zip((d[0], d[2], d[3]), (p, m, v), strict=True):
        assert_same_bits(dev.host, host)


def test_cuda_path_compiles_each_source_once_per_device():
    acc, g = FakeCupyArray(np.zeros(8, np.float32)), FakeCupyArray(np.ones(8, np.float32))
    with _fake_cupy():
        for _ in range(3):
            K.add_scale(acc, g, 1.0)
            K.l2_norm(g)
        assert sorted(cuda_module._modules) == [(0, "accumulate.cu"), (0, "l2_norm.cu")]
    assert acc.host[0] == 3.0
