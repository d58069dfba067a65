"""minitorch_accum.testing.torch as a PyTorch user meets it: the docs' example passes through the
fixture and fails when its loss is a mean of micro-batch means, check_module bounds a torch Module's
window by per-row gradients and reads its item count, the fixture comes with the plugin, and nothing
imports torch before a check runs."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

from minitorch_accum.testing.property_results import FAILED, INEXACT, PASSED  # noqa: E402
from minitorch_accum.testing.torch import check_module, check_training_loop  # noqa: E402
from minitorch_accum.testing.torch.module_check import _TorchSubject, row_magnitudes  # noqa: E402
from minitorch_accum.testing.torch.pytest_fixture import TorchAccumulationEquivalence  # noqa: E402
from tests.testing.installed_plugin import install_plugin  # noqa: E402

pytestmark = pytest.mark.oracle
ROOT = Path(__file__).resolve().parents[2]
MEAN_OF_MEANS = "torch.nn.functional.cross_entropy(model(x), y) / len(micro_batches)"


def docs_example() -> str:
    """The python block after the torch example's marker comment in docs/equivalence.md."""
    text = (ROOT / "docs" / "equivalence.md").read_text()
    found = re.search(r"<!-- the torch example:[^>]*-->\s*```python\n(.*?)```", text, re.S)
    assert found, "docs/equivalence.md lost its torch example"
    return found.group(1)


def run_example(code: str) -> TorchAccumulationEquivalence:
    namespace: dict = {}
    exec(compile(code, "docs/equivalence.md", "exec"), namespace)
    fixture = TorchAccumulationEquivalence({})
    namespace["test_my_loop"](fixture)
    return fixture


def test_the_docs_torch_example_is_about_ten_lines_and_passes() -> None:
    code = docs_example()
    assert len([line for line in code.splitlines() if line.strip()]) <= 13
    (report,) = run_example(code).reports
    assert [(r.name, r.status) for r in report.results] == [("loop_steps_equal_big_batch", PASSED)]


def test_the_docs_torch_example_with_a_mean_of_means_fails_by_name() -> None:
    code = docs_example()
    line = 'torch.nn.functional.cross_entropy(model(x), y, reduction="sum") / items'
    assert line in code
    with pytest.raises(AssertionError, match=r"loop_steps_equal_big_batch: parameter .* differs by .* split") as caught:
        run_example(code.replace(line, MEAN_OF_MEANS))
    assert "no multiple of the big batch's" in "\n".join(caught.value.__notes__)


def _mlp() -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 4))


def _padded_tokens() -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(8, 5, 6, generator=generator)
    y = torch.randint(0, 4, (8, 5), generator=generator)
    lengths = torch.tensor([5, 1, 2, 5, 3, 1, 4, 2])
    return x, torch.where(torch.arange(5)[None, :] < lengths[:, None], y, -100)


def _token_loss(output: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return F.cross_entropy(output.flatten(0, 1), targets.flatten(), reduction="sum"), (targets != -100).sum()


def test_check_module_passes_a_token_model_within_the_rounding_bound_in_float32() -> None:
    report = check_module(_mlp, _token_loss, _padded_tokens(), splits=[(3, 1, 4), (1,) * 8])
    window, count = report.results
    assert window.status == count.status == PASSED and window.max_gap > 0
    assert "rounding bound for float32" in window.why
    assert "counted 23 items, its summed loss reaches 23 output positions" in count.worst_parameter()[1].scenario


def test_check_module_fails_a_count_taken_before_the_shift() -> None:
    def shifted(output: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, int]:
        loss, _ = _token_loss(output[:, :-1], labels[:, 1:])
        return loss, int((labels != -100).sum())  # every row's first label counted, never a target

    report = check_module(_mlp, shifted, _padded_tokens(), splits=[(3, 1, 4)], raise_on_failure=False)
    assert report["window_equals_full_batch"].status == PASSED  # the window and the big batch agree: both wrong
    count = report["item_count_matches_the_loss"]
    assert count.status == FAILED
    assert "rows 0:8: loss_fn counted 23 items, its summed loss reaches 15 output positions" in count.summary()


def test_check_module_reports_training_mode_batch_norm_as_not_expected_to_be_equal() -> None:
    def with_batch_norm() -> torch.nn.Module:
        return torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.BatchNorm1d(8), torch.nn.Linear(8, 3))

    x, y = torch.randn(8, 6), torch.arange(8) % 3
    report = check_module(with_batch_norm, lambda out, y: (F.cross_entropy(out, y, reduction="sum"), len(y)),
                          (x, y), splits=[(4, 4)])
    window = report["window_equals_full_batch"]
    assert window.status == INEXACT and window.max_gap > 1e-4
    assert "layer 1 (BatchNorm1d): BatchNorm in training mode" in window.notes[0]
    count = report["item_count_matches_the_loss"]  # the rows interact: a micro-batch's count is no evidence either
    assert count.status == INEXACT and "layer 1 (BatchNorm1d): BatchNorm in training mode" in count.notes[0]


def test_per_row_gradients_by_vmap_equal_the_loop_of_backward_passes() -> None:
    x, y = _padded_tokens()
    subject = _TorchSubject(_mlp, _token_loss, (x, y))
    vmapped = row_magnitudes(subject, subject.build())

    def counted_with_int(output: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, int]:
        loss, items = _token_loss(output, targets)
        return loss, int(items)  # int() of a tensor: vmap cannot trace it, one backward per row instead

    subject = _TorchSubject(_mlp, counted_with_int, (x, y))
    looped = row_magnitudes(subject, subject.build())
    assert vmapped.items == looped.items == 23 and vmapped.fan == looped.fan == 8 + 8 + 8 + 4
    for name in vmapped.abs_sum:
        torch.testing.assert_close(torch.from_numpy(vmapped.abs_sum[name]), torch.from_numpy(looped.abs_sum[name]))
        assert vmapped.abs_sum[name].any()


def test_a_torch_loop_needs_a_torch_model() -> None:
    from minitorch_accum import nn

    with pytest.raises(TypeError, match=r"the loop's model must be a torch\.nn\.Module, got Linear"):
        check_training_loop(lambda k: (nn.Linear(2, 2), lambda mbs: None), (torch.zeros(4, 2),))


def test_without_torch_the_adapter_imports_and_its_checks_say_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch now raises ImportError
    from minitorch_accum.testing.torch.loop import require_torch

    with pytest.raises(ImportError, match=r'needs PyTorch: pip install "minitorch_accum\[oracle\]"'):
        require_torch()


def test_the_fixture_module_loads_neither_torch_nor_the_library() -> None:
    code = ("import sys\nimport minitorch_accum.testing.torch.pytest_fixture\n"
            "print('torch' in sys.modules, sorted(m for m in sys.modules if m.startswith('minitorch_accum.')))")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split(" ", 1)[0] == "False"
    assert set(re.findall(r"'([\w.]+)'", out.stdout)) == {"minitorch_accum.testing", "minitorch_accum.testing.torch",
                                                          "minitorch_accum.testing.marker_defaults",
                                                          "minitorch_accum.testing.torch.pytest_fixture"}


def test_the_plugin_gives_the_torch_fixture_to_a_users_suite(pytester: pytest.Pytester,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    install_plugin(pytester, monkeypatch, "minitorch_accum_torch_probe")
    code = docs_example()
    pytester.makepyfile(test_users_loop=code,
                        test_users_mean_of_means=code.replace(
                            'torch.nn.functional.cross_entropy(model(x), y, reduction="sum") / items', MEAN_OF_MEANS))
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-W", "ignore::DeprecationWarning")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*AccumulationMismatch: loop_steps_equal_big_batch: parameter * differs by *"])


def _dropout_loop(keeps_generator: bool):
    def make_loop(k: int):
        from minitorch_accum.testing.torch import Loop

        model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Dropout(0.3), torch.nn.Linear(16, 3)).double()
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

        def window(micro_batches: list) -> None:
            items = sum(len(y) for _, y in micro_batches)
            for x, y in micro_batches:
                (F.cross_entropy(model(x), y, reduction="sum") / items).backward()
            opt.step()
            opt.zero_grad()

        def state() -> dict:
            return {"model": {k: v.clone() for k, v in model.state_dict().items()}, "opt": opt.state_dict(),
                    "rng": torch.get_rng_state() if keeps_generator else None}

        def restore(saved: dict) -> None:
            model.load_state_dict(saved["model"])
            opt.load_state_dict(saved["opt"])
            if saved["rng"] is not None:
                torch.set_rng_state(saved["rng"])

        return Loop(model, window, state=state, restore=restore)

    return make_loop


def test_a_torch_resume_that_leaves_the_dropout_generator_out_fails() -> None:
    batch = (torch.randn(12, 8, dtype=torch.float64), torch.arange(12) % 3)
    kept = check_training_loop(_dropout_loop(True), batch, splits=[(3, 1, 4, 4)])
    assert [r.status for r in kept.results] == [INEXACT, PASSED]
    assert "layer 1 (Dropout): dropout (p=0.3) draws its masks per micro-batch" in kept.results[0].notes
    forgot = check_training_loop(_dropout_loop(False), batch, splits=[(3, 1, 4, 4)], raise_on_failure=False)
    resume = forgot["loop_resume_equals_uninterrupted"]
    assert resume.status == FAILED and any("does state() hold the generator's state" in n for n in resume.notes)
