"""The CUDA sources: every .cu file compiles through NVRTC for sm_90 (on CI,
which installs nvidia-cuda-nvrtc: a missing library fails, it does not skip),
defines every kernel the launch planner and the emulator name, and the structs
and constants shared with Python agree on both sides."""

from __future__ import annotations

import re
import shutil
from dataclasses import fields

import numpy as np
import pytest

from minitorch_accum.kernels import catalog, modes
from minitorch_accum.kernels.dispatch import native
from minitorch_accum.kernels.dtypes import ACCUMULATE_KINDS, BFLOAT16_KINDS, FLOAT32, FLOAT64, NORM_DTYPES, SHORT_NAMES
from minitorch_accum.kernels.launch import emulator
from minitorch_accum.kernels.launch import plan as launch_plan
from minitorch_accum.kernels.optimizer_scalars import AdamScalars, SgdScalars
from minitorch_accum.kernels.sources import csrc_dir, cuda_sources, source_text
from minitorch_accum.kernels.tools import nvrtc
from minitorch_accum.kernels.tools.command import main
from minitorch_accum.kernels.tools.resource_usage import parse_resource_usage, resource_usage


@pytest.fixture(scope="module")
def compiled():
    try:
        return nvrtc.compile_all("sm_90")
    except nvrtc.NvrtcNotFoundError as error:  # CI installs the wheel: this must never be skipped
        pytest.fail(f"NVRTC is required to check the CUDA sources: {error}")


def _planned_kernel_names() -> set[str]:
    accumulate_modes = {k.mode for k in catalog.CATALOG if k.mode is not None}
    assert accumulate_modes == {modes.ADD, modes.COPY, modes.ADD_COMPENSATED, modes.COPY_COMPENSATED,
                                modes.ADD_STOCHASTIC, modes.COPY_STOCHASTIC}
    # a bfloat16 acc: rounded to nearest by the plain modes, stochastically by the stochastic ones
    pairs = {modes.ADD: {**ACCUMULATE_KINDS, **BFLOAT16_KINDS}, modes.COPY: {**ACCUMULATE_KINDS, **BFLOAT16_KINDS},
             modes.ADD_STOCHASTIC: BFLOAT16_KINDS, modes.COPY_STOCHASTIC: BFLOAT16_KINDS}
    names = {launch_plan.accumulate_kernel_name(m, a, g) for m in accumulate_modes
             for a, g in pairs.get(m, ACCUMULATE_KINDS)}
    names |= {f"mta_{catalog.accumulate_kernel(m, listed=True).name}" for m in accumulate_modes}
    names |= {"mta_multi_l2_norm_partials", "mta_l2_norm_finalize"}
    for dtype in (FLOAT32, FLOAT64):
        s = SHORT_NAMES[dtype]
        names |= {
            f"mta_sgd_momentum_step_{s}",
            f"mta_multi_sgd_momentum_step_{s}",
            f"mta_adamw_step_{s}",
            f"mta_multi_adamw_step_{s}",
        }
    return names


def test_every_cuda_source_compiles_for_sm_90(compiled):
    assert [r.name for r in compiled] == [str(p) for p in cuda_sources()]
    assert len(compiled) >= 3
    for result in compiled:
        assert result.ok, f"{result.name} failed to compile:\n{result.log}"
        assert result.binary_bytes > 0


def test_sources_define_every_planned_and_emulated_kernel(compiled):
    entries = {e for r in compiled for e in r.entries}
    planned = _planned_kernel_names()
    assert planned <= entries, planned - entries
    assert set(emulator.kernels()) == entries
    for result in compiled:
        assert {catalog.source_of(e) for e in result.entries} == {result.name.rsplit("/", 1)[-1]}


def test_every_kernel_starts_with_a_comment_of_what_and_bytes():
    for path in cuda_sources():
        text = path.read_text()
        for match in re.finditer(r"^(?:extern \"C\" __global__|MTA_\w+_KERNEL\()", text, re.MULTILINE):
            before = text[: match.start()].rstrip().splitlines()
            # the kernel's group comment sits above it, past its siblings
            comments = [line for line in before if line.startswith("//")]
            assert comments and re.search(r"\d+ B(/elem| per)", "\n".join(before[-12:])), (path, match.group())


@pytest.mark.parametrize("path", cuda_sources(), ids=lambda p: p.name)
def test_device_math_ignores_flush_contract_and_fast_math_flags(path):
    # CuPy appends -ftz=true to every NVRTC compile: the kernels must still
    # round as IEEE (no .ftz, no contraction into fma, no approximate div/sqrt). The one fma is
    # the float polynomials' own (mta_fmaf, fma.rn.f32 written out); a contracted float one would
    # carry .ftz under these flags, a contracted double one is fma.rn.f64
    hostile = ("--std=c++17", "--fmad=true", "-ftz=true", "--use_fast_math")
    result = nvrtc.compile_source(source_text(path), str(path), "compute_90", hostile)
    assert result.ok, result.log
    for forbidden in (".ftz", ".approx", "rsqrt"):
        assert forbidden not in result.ptx, f"{path.name}: {forbidden} in PTX"
    fmas = set(re.findall(r"\bfma\.[\w.]+", result.ptx))
    assert fmas <= {"fma.rn.f32"}, f"{path.name}: {fmas - {'fma.rn.f32'}} in PTX"


def test_compile_errors_point_at_the_real_file_and_line(tmp_path):
    broken = tmp_path / "broken.cu"
    broken.write_text('#include "accum_math.cuh"\n\nextern "C" __global__ void k(float* x) {\n  x[0] = y;\n}\n')
    (tmp_path / "accum_math.cuh").write_text((csrc_dir() / "accum_math.cuh").read_text())
    result = nvrtc.compile_file(broken)
    assert not result.ok
    assert f"{broken}(4)" in result.log and 'identifier "y" is undefined' in result.log


def test_included_headers_are_inlined_with_line_markers():
    text = source_text(csrc_dir() / "l2_norm.cu")
    assert f'#line 1 "{csrc_dir() / "accum_math.cuh"}"' in text
    assert "#pragma once" not in text
    assert text.count("struct MtaChunk {") == 1  # each header once


def test_native_structs_and_constants_match_the_python_mirrors():
    layout = native().layout()
    assert layout["chunk_size"] == launch_plan.CHUNK_SIZE
    assert layout["multi_tensor_block"] == launch_plan.MULTI_TENSOR_BLOCK
    assert layout["max_blocks"] == launch_plan.MAX_BLOCKS
    for depth, c_table in layout["tables"].items():
        dtype = launch_plan.table_dtype(depth)
        assert c_table["itemsize"] == dtype.itemsize <= 4000
        assert c_table["max_tensors"] == launch_plan.TABLE_CAPACITY[depth]
        for field in ("addresses", "sizes", "kinds", "block_to_tensor", "block_to_chunk"):
            assert c_table[field] == dtype.fields[field][1], (depth, field)
    for name, make, scalars in (
        ("sgd", launch_plan.sgd_dtype, SgdScalars),
        ("adam", launch_plan.adam_dtype, AdamScalars),
    ):
        for short, dtype in (("f32", np.dtype(np.float32)), ("f64", np.dtype(np.float64))):
            c_struct, py = layout[f"{name}_{short}"], make(dtype)
            assert c_struct.pop("itemsize") == py.itemsize
            # every field of the C struct, in order: the dataclass, its NumPy twin, the same offsets
            assert list(c_struct) == [f.name for f in fields(scalars)] == list(py.names)
            for field, offset in c_struct.items():
                assert py.fields[field][1] == offset, (name, short, field)
    kinds = {**ACCUMULATE_KINDS, **BFLOAT16_KINDS}
    assert layout["kinds"] == {f"{SHORT_NAMES[a]}_{SHORT_NAMES[g]}": k for (a, g), k in kinds.items()}
    assert layout["dtypes"] == {SHORT_NAMES[d]: code for d, code in NORM_DTYPES.items()}


def test_command_lists_kernels(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    for info in catalog.CATALOG:
        assert info.name in out
    assert re.search(r"add_scale\s+12\s+acc \+= s \* g", out)


def test_command_compiles_everything(capsys, compiled):
    assert main(["compile", "--arch", "sm_90"]) == 0
    out = capsys.readouterr().out
    assert out.count("OK ") == len(cuda_sources()) and "FAIL" not in out


def test_command_refuses_an_architecture_that_is_not_one(capsys):
    # it once printed FAIL for every source and exited 0
    with pytest.raises(SystemExit) as exit_info:
        main(["compile", "--arch", "banana"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "argument --arch: 'banana' is not a GPU architecture: give sm_XX (a cubin) or compute_XX (PTX)" in err


def test_command_refuses_an_architecture_nvrtc_cannot_compile_for(capsys, compiled):
    assert main(["compile", "--arch", "sm_20"]) == 2
    captured = capsys.readouterr()
    assert "cannot compile for sm_20; it supports sm_" in captured.err and "FAIL" not in captured.out
    assert main(["compile", "--arch", "compute_90"]) == 0  # PTX for a supported capability


def test_command_exits_1_when_a_source_fails_to_compile(capsys, monkeypatch, compiled):
    failing = nvrtc.CompileResult("broken.cu", "sm_90", False, "broken.cu(3): error", (), 0, 0.0)
    monkeypatch.setattr(nvrtc, "compile_all", lambda arch: [compiled[0], failing])
    assert main(["compile"]) == 1
    captured = capsys.readouterr()
    assert "FAIL broken.cu" in captured.out and "1 of 2 CUDA sources failed to compile for sm_90" in captured.err


def test_command_help_shows_defaults_and_a_line_per_option(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    with pytest.raises(SystemExit) as exit_info:
        main(["compile", "--help"])
    assert exit_info.value.code == 0
    lines = capsys.readouterr().out.splitlines()
    options = [line.strip() for line in lines[lines.index("options:") + 1 :]]
    assert options == [
        "-h, --help        show this help message and exit",
        "--arch ARCH       sm_XX (a cubin) or compute_XX (PTX) (default: sm_90)",
        "--resource-usage  print registers and shared memory too (needs nvcc)",
    ]


RESOURCE_REPORT = """\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'mta_l2_norm_finalize' for 'sm_90'
ptxas info    : Function properties for mta_l2_norm_finalize
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 14 registers, used 1 barriers, 4096 bytes smem
ptxas info    : Compiling entry function 'mta_add_scale_f32_f32' for 'sm_90'
ptxas info    : Function properties for mta_add_scale_f32_f32
    8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads
ptxas info    : Used 24 registers, used 0 barriers, 380 bytes cmem[0]
"""


def test_resource_usage_report_is_parsed():
    first, second = parse_resource_usage(RESOURCE_REPORT)
    assert (first.kernel, first.registers, first.shared_bytes) == ("mta_l2_norm_finalize", 14, 4096)
    assert (second.registers, second.shared_bytes, second.stack_bytes, second.spill_loads) == (24, 0, 8, 4)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc (a CUDA toolkit)")
def test_nvcc_reports_registers_and_shared_memory():
    records = {r.kernel: r for r in resource_usage(csrc_dir() / "l2_norm.cu")}
    # the block reduction keeps a sum and a max per thread: two fp64 arrays of MTA_MT_BLOCK
    assert records["mta_multi_l2_norm_partials"].shared_bytes == 2 * 512 * 8
    assert all(r.registers > 0 and r.spill_stores == 0 for r in records.values())
