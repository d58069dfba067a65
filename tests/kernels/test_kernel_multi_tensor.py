"""Multi-tensor launches: one call over a list equals the per-tensor kernels,
across mixed sizes and dtypes and across several launches when tables fill."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import minitorch_accum.kernels as K
from minitorch_accum.kernels.dtypes import ACCUMULATE_KINDS, BFLOAT16, FLOAT16, FLOAT32
from minitorch_accum.kernels.launch import plan as launch_plan
from tests.kernels.kernel_cases import CPU_PATHS, array, assert_same_bits, copies, on_path, seeds

PAIRS = sorted(ACCUMULATE_KINDS, key=str)
list_sizes = st.lists(
    st.one_of(st.sampled_from([0, 1, 3, 4, 8, 65535, 65536, 65537, 131073]), st.integers(0, 5000)),
    min_size=0,
    max_size=12,
)


def _tensors(rng, sizes, pairs, compensated):
    accs, comps, gs = [], [], []
    for n, (a_dtype, g_dtype) in zip(sizes, pairs, strict=True):
        offset = int(rng.integers(0, 4))
        accs.append(array(rng, n, a_dtype, offset))
        comps.append(array(rng, n, a_dtype, offset, magnitude=1e-7) if compensated else None)
        gs.append(array(rng, n, g_dtype, offset))
    return accs, comps, gs


@pytest.mark.parametrize("path", CPU_PATHS)
@pytest.mark.parametrize("mode", ["add_scale", "copy_scale", "add_scale_compensated", "copy_scale_compensated"])
@given(sizes=list_sizes, seed=seeds, data=st.data())
def test_multi_equals_per_tensor(path, mode, sizes, seed, data):
    rng = np.random.default_rng(seed)
    pairs = [data.draw(st.sampled_from(PAIRS)) for _ in sizes]
    compensated = mode.endswith("compensated")
    accs, comps, gs = _tensors(rng, sizes, pairs, compensated)
    expected = [copies(a)[0] for a in accs]
    expected_comps = [copies(c)[0] for c in comps]
    for i in range(len(sizes)):
        if compensated:
            getattr(K.reference, mode)(expected[i], expected_comps[i], gs[i], 0.25)
        else:
            getattr(K.reference, mode)(expected[i], gs[i], 0.25)
    # a small table forces several launches even for short lists
    with on_path(path), launch_plan.table_limits(max_tensors=3, max_blocks=2):
        if compensated:
            getattr(K, f"multi_{mode}")(accs, comps, gs, 0.25)
        else:
            getattr(K, f"multi_{mode}")(accs, gs, 0.25)
    for i in range(len(sizes)):
        assert_same_bits(accs[i], expected[i], f"multi_{mode} tensor {i} {pairs[i]} n={sizes[i]}")
        if compensated:
            assert_same_bits(comps[i], expected_comps[i], f"multi_{mode} comp {i}")


@pytest.mark.parametrize("path", CPU_PATHS)
def test_long_mixed_list_needs_several_full_size_tables(path):
    # 150 tensors > 64 per depth-2 table: at least three launches with the real capacity
    rng = np.random.default_rng(7)
    pairs = [PAIRS[i % len(PAIRS)] for i in range(150)]
    sizes = [int(rng.integers(1, 3000)) for _ in pairs]
    accs, _, gs = _tensors(rng, sizes, pairs, False)
    expected = [copies(a)[0] for a in accs]
    for e, g in zip(expected, gs, strict=True):
        K.reference.add_scale(e, g, -1.5)
    with on_path(path):
        K.multi_add_scale(accs, gs, -1.5)
    for a, e in zip(accs, expected, strict=True):
        assert_same_bits(a, e)


@pytest.mark.parametrize("path", CPU_PATHS)
def test_multi_cast_add_scale_takes_only_low_precision(path):
    accs = [np.zeros(5, np.float32), np.zeros(70000, np.float32)]
    gs = [np.ones(5, FLOAT16), np.full(70000, 2, BFLOAT16)]
    with on_path(path):
        K.multi_cast_add_scale(accs, gs, 0.5)
        assert accs[0][0] == 0.5 and accs[1][-1] == 1.0
        with pytest.raises(TypeError, match=r"multi_cast_add_scale: gs\[0\]"):
            K.multi_cast_add_scale([np.zeros(2, FLOAT32)], [np.ones(2, FLOAT32)], 1.0)


@pytest.mark.parametrize("path", CPU_PATHS)
def test_empty_lists_are_a_no_op(path):
    with on_path(path):
        K.multi_add_scale([], [], 1.0)
        K.multi_add_scale_compensated([], [], [], 1.0)
        assert K.multi_l2_norm([]) == 0.0


@given(
    sizes=st.lists(st.integers(0, 300_000), max_size=30),
    depth=st.sampled_from([1, 2, 3, 4]),
    max_tensors=st.one_of(st.none(), st.integers(1, 5)),
    max_blocks=st.one_of(st.none(), st.integers(1, 7)),
)
def test_chunk_tables_cover_every_chunk_exactly_once(sizes, depth, max_tensors, max_blocks):
    entries = [([1000 + i] * depth, n, i % 5) for i, n in enumerate(sizes)]
    with launch_plan.table_limits(max_tensors=max_tensors, max_blocks=max_blocks):
        tables = launch_plan.build_tables(depth, entries)
    cap_t = min(launch_plan.TABLE_CAPACITY[depth], max_tensors or 10**9)
    cap_b = min(launch_plan.MAX_BLOCKS, max_blocks or 10**9)
    seen = []
    for table, blocks in tables:
        assert 0 < blocks <= cap_b
        t = table[0]
        slots = set(t["block_to_tensor"][:blocks].tolist())
        assert max(slots) < cap_t
        for b in range(blocks):
            slot = int(t["block_to_tensor"][b])
            tensor = int(t["addresses"][0, slot]) - 1000
            assert t["sizes"][slot] == sizes[tensor] and t["kinds"][slot] == tensor % 5
            assert (t["addresses"][:, slot] == 1000 + tensor).all()
            seen.append((tensor, int(t["block_to_chunk"][b])))
    expected = [(i, c) for i, n in enumerate(sizes) for c in range(-(-n // launch_plan.CHUNK_SIZE))]
    assert seen == expected  # every chunk once, in order
