"""The launch emulator runs the CUDA kernels for any grid and block shape:
grid-stride loops cover every element even with a grid far too small, and
block-wide barriers (__syncthreads) behave as on the GPU."""

from __future__ import annotations

import numpy as np
import pytest

import minitorch_accum.kernels as K
from minitorch_accum.kernels import reference
from minitorch_accum.kernels.dtypes import BFLOAT16, FLOAT32, FLOAT64
from minitorch_accum.kernels.launch import emulator
from minitorch_accum.kernels.launch import plan as launch_plan
from tests.kernels.kernel_cases import array, assert_same_bits, copies, on_path

SHAPES = [(1, 32), (1, 1), (3, 33), (7, 256), (2, 1024), (64, 64)]


@pytest.mark.parametrize(("grid", "block"), SHAPES)
@pytest.mark.parametrize("pair", [(FLOAT32, FLOAT32), (FLOAT32, BFLOAT16), (FLOAT64, FLOAT32)])
def test_grid_stride_covers_everything_for_any_shape(grid, block, pair):
    rng = np.random.default_rng(grid * 1000 + block)
    n = 100_003 if grid * block >= 32 else 5_001  # odd: a scalar tail after the packs
    for offset in (0, 1):
        acc = array(rng, n, pair[0], offset)
        comp = array(rng, n, pair[0], offset, magnitude=1e-6)
        g = array(rng, n, pair[1], offset)
        expected, expected_comp = copies(acc, comp, offset=offset)
        reference.add_scale_compensated(expected, expected_comp, g, 0.75)
        with on_path("emulated", grid=grid, block=block):
            K.add_scale_compensated(acc, comp, g, 0.75)
        assert_same_bits(acc, expected, f"grid={grid} block={block} offset={offset}")
        assert_same_bits(comp, expected_comp)


@pytest.mark.parametrize("block", [1, 3, 32, 48, 129, 512])
def test_block_reduction_with_barriers_for_any_block_size(block):
    rng = np.random.default_rng(block)
    xs = [array(rng, n, dtype) for n, dtype in [(70_001, FLOAT32), (5, FLOAT64), (1_000, BFLOAT16)]]
    expected = reference.multi_l2_norm(xs)
    with on_path("emulated", block=block):
        # each thread sums up to 65536 / block squares in fp64 (one thread: all of a chunk)
        assert K.multi_l2_norm(xs) == pytest.approx(expected, rel=1e-11)


@pytest.mark.parametrize("block", [16, 100, 512])
def test_multi_tensor_kernels_take_any_block(block):
    rng = np.random.default_rng(block)
    accs = [array(rng, n, FLOAT32, 1) for n in (1, 65_537, 300)]
    gs = [array(rng, n, FLOAT32, 1) for n in (1, 65_537, 300)]
    expected = [copies(a)[0] for a in accs]
    for e, g in zip(expected, gs, strict=True):
        reference.copy_scale(e, g, 3.0)
    with on_path("emulated", block=block):
        K.multi_copy_scale(accs, gs, 3.0)
    for a, e in zip(accs, expected, strict=True):
        assert_same_bits(a, e)


def test_direct_launch_of_a_kernel_by_name():
    acc = np.arange(10, dtype=np.float32)
    g = np.ones(10, np.float32)
    flag = np.zeros(1, np.int32)
    emulator.launch("mta_add_scale_f32_f32", 1, 4, acc, g, np.uint64(10), np.float32(2.0), flag)
    assert_same_bits(acc, np.arange(10, dtype=np.float32) + 2)
    emulator.launch("mta_copy_scale_f32_f32", (2, 1, 1), (3, 1, 1), acc, g, np.uint64(7), np.float32(-1.0), None)
    assert acc[:7].tolist() == [-1.0] * 7 and acc[7] == 9.0


def test_plans_run_unchanged_on_the_emulator():
    # the very launches the CuPy path would issue, chunk table and all
    acc = np.zeros(70_000, np.float32)
    g = np.ones(70_000, np.float32)
    launches = launch_plan.plan_multi_accumulate(0, [(acc, None, g)], 1.0, None, emulator.address_of)
    assert [step.kernel for step in launches] == ["mta_multi_add_scale"]
    assert launches[0].grid == (2, 1, 1) and launches[0].block == (512, 1, 1)
    emulator.run(launches)
    assert (acc == 1).all()


def test_emulator_rejects_bad_launches():
    with pytest.raises(KeyError, match="no emulated kernel"):
        emulator.launch("mta_no_such_kernel", 1, 1)
    with pytest.raises(ValueError, match="launch bounds"):
        emulator.launch("mta_l2_norm_finalize", 1, 1024, np.zeros(1), np.uint64(1), np.zeros(1))
    with pytest.raises(TypeError, match="takes 5 arguments"):
        emulator.launch("mta_add_scale_f32_f32", 1, 1, np.zeros(1, np.float32))
    with pytest.raises(ValueError, match="positive"):
        emulator.launch("mta_add_scale_f32_f32", 0, 1, None, None, np.uint64(0), np.float32(1), None)


def test_registry_lists_every_kernel_with_its_barrier_use():
    kernels = emulator.kernels()
    # accumulation, norm and optimizer kernels; bfloat16 accumulators (6 to nearest, 6 + 2 stochastic); the fused
    # layer kernels (softmax's forward and backward among them)
    assert len(kernels) == 34 + 14 + 22
    assert kernels["mta_layer_norm_forward_f32"] == (9, 256, True)
    assert kernels["mta_softmax_forward_f32"] == (7, 256, True)
    assert kernels["mta_cross_entropy_backward_f64"][2] is False
    assert kernels["mta_multi_l2_norm_partials"][2] is True
    assert kernels["mta_add_scale_f32_f32"] == (5, 1024, False)
    assert kernels["mta_add_scale_stochastic_bf16_f32"] == (9, 1024, False)  # + seed, window, micro_batch, offset
    assert kernels["mta_multi_add_scale_stochastic"] == (6, 512, False)
