"""The kernel benchmark's core runs end to end on tiny sizes and writes well-formed results.

No time is asserted: only that every figure is there, finite and positive.
"""

from __future__ import annotations

import json
import math

import pytest

from benchmarks.harness import ResultFiles, gpt2_small_shapes, run_benchmark
from benchmarks.kernels import KERNELS, Settings, main

ACCUMULATE_VARIANTS = {
    "numpy_naive",
    "numpy_out",
    "native_arena",
    "native_copy_scale",
    "native_cast_add_scale",
    "native_add_scale_compensated",
}
LIMIT_VARIANTS = {"copy_array_library", "copy_native", "triad_array_library"}
MODEL_ONLY = {"native_per_tensor", "native_multi", "native_multi_cast_add_scale"}
TORCH_VARIANTS = {"torch_foreach", "torch_flat", "torch_mixed", "copy_torch", "triad_torch"}


def _torch_installed() -> bool:
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[ResultFiles, dict]:
    out = tmp_path_factory.mktemp("bench")
    settings = Settings(
        sizes=(1 << 10, 1 << 12),
        warmup=0,
        repeats=1,
        small_repeats=1,
        min_sample_bytes=1,
        model_divisor=32,
        model_repeats=1,
        target_min_elements=1 << 12,  # so the tiny cases fill the targets section too
    )
    _payload, files = run_benchmark(KERNELS, settings, out)
    written = json.loads((out / "kernels-latest-cpu.json").read_text())
    return files, written


def _positive(value: object) -> bool:
    return isinstance(value, int | float) and math.isfinite(value) and value > 0


def test_kernel_benchmark_writes_json_and_png(tiny_run):
    files, written = tiny_run
    assert files.json.name.startswith("kernels-") and files.json.name.endswith("-cpu.json")
    assert json.loads(files.json.read_text()) == written
    assert files.png is not None and files.png.name == "kernels-latest-cpu.png"
    assert files.png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert written["benchmark"] == "kernels"
    assert {"machine", "settings", "cases", "targets", "all_targets_met"} <= set(written)
    assert written["machine"]["cores"] >= 1
    assert written["settings"]["sizes"] == [1 << 10, 1 << 12]


def test_kernel_benchmark_times_every_variant_with_finite_positive_figures(tiny_run):
    _, written = tiny_run
    cases = {case["case"]: case for case in written["cases"]}
    assert set(cases) == {"2^10", "2^12", "model"}
    expected = ACCUMULATE_VARIANTS | LIMIT_VARIANTS | (TORCH_VARIANTS if _torch_installed() else set())
    for name, case in cases.items():
        variants = case["variants"]
        wanted = expected | (MODEL_ONLY if name == "model" else set())
        assert wanted <= set(variants), (name, wanted - set(variants))
        for variant, figures in variants.items():
            for key in ("median_s", "gb_per_s", "fraction_of_limit", "fraction_of_copy", "bytes_per_element"):
                assert _positive(figures[key]), (name, variant, key, figures[key])
            assert len(figures["samples_s"]) == 1
        assert _positive(case["limit"]["gb_per_s"]) and _positive(case["limit"]["copy_gb_per_s"])
        for ratio, value in case["ratios"].items():
            assert _positive(value), (name, ratio, value)
        assert "arena_vs_numpy_naive" in case["ratios"]
    model = cases["model"]
    assert model["tensors"] == len(gpt2_small_shapes())
    assert _positive(model["ratios"]["multi_vs_per_tensor"])


def test_kernel_benchmark_states_each_target_with_its_measured_value(tiny_run):
    _, written = tiny_run
    targets = written["targets"]
    assert {t["case"] for t in targets} == {"2^12", "model"}
    for t in targets:
        assert {"target", "case", "threshold", "measured", "met"} <= set(t)
        if t["measured"] is not None:
            assert _positive(t["measured"]) and t["met"] == (t["measured"] >= t["threshold"])


def test_gpt2_small_shapes_are_the_124m_parameter_model():
    shapes = gpt2_small_shapes()
    assert len(shapes) == 148
    assert sum(math.prod(shape) for _, shape in shapes) == 124_439_808


def test_cuda_device_is_refused_cleanly_without_a_gpu(capsys):
    from minitorch_accum import cuda_available

    if cuda_available():
        pytest.skip("a GPU is present")
    assert main(["--device", "cuda"]) == 2
    assert "--device cuda" in capsys.readouterr().err
