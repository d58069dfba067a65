"""Each maccum command end to end, on small settings."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file

from minitorch_accum.cli import main


def test_train_writes_metrics_final_parameters_and_resumes(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    args = ["train", "--dataset", "digits", "--micro-batch", "64", "--accum", "4", "--epochs", "1",
            "--out", str(tmp_path), "--progress", "plain", "--checkpoint-every", "2"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "step 1 " in out and "trained 6 optimizer steps" in out
    lines = [json.loads(s) for s in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in lines if r["kind"] == "train"] == [1, 2, 3, 4, 5, 6]
    final = load_file(str(tmp_path / "final.safetensors"))
    assert set(final) == {"0.weight", "0.bias", "2.weight", "2.bias"} and final["0.weight"].shape == (64, 128)
    # --resume from the last checkpoint (end of the run) trains nothing more and keeps the result
    assert main([*args, "--resume"]) == 0
    again = load_file(str(tmp_path / "final.safetensors"))
    np.testing.assert_array_equal(again["0.weight"], final["0.weight"])


def test_train_on_padded_sequences(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["train", "--dataset", "sequences", "--micro-batch", "8", "--accum", "2", "--epochs", "1",
                 "--out", str(tmp_path), "--progress", "none"]) == 0
    lines = [json.loads(s) for s in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    items = [r["items"] for r in lines if r["kind"] == "train"]
    assert len(set(items)) > 1  # windows hold different numbers of real (unpadded) targets


def test_compare_writes_a_real_png_and_a_table(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["compare", "--dataset", "digits", "--micro-batch", "16", "--accum", "4", "--epochs", "1",
                 "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "| 4 x 16 (accumulated) | 16 | 4 |" in out
    png = (tmp_path / "compare.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    import matplotlib.image

    assert matplotlib.image.imread(tmp_path / "compare.png").shape[0] > 100
    table = (tmp_path / "compare.md").read_text()
    rows = [line for line in table.splitlines() if line.startswith("| 4 x 16") or line.startswith("| 64 ")]
    assert len(rows) == 2
    assert rows[0].split("|")[5] == rows[1].split("|")[5]  # same final loss, to the printed digits


def test_compare_names_the_big_batch_by_the_rows_it_really_holds(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture) -> None:
    # k x b = 10000 x 64 rows, but digits trains on 1438: the window and the big batch are the whole epoch
    assert main(["compare", "--dataset", "digits", "--micro-batch", "64", "--accum", "10000", "--epochs", "1",
                 "--progress", "none", "--out", str(tmp_path)]) == 0
    captured = capsys.readouterr()
    out = captured.out
    assert "(k x b = 10000 x 64 = 640,000 rows is more than the 1,438 of the training set: the big batch is all " \
           "of them, as the window is)" in out
    assert "--- one big batch: micro-batch 1438, k=1" in out and "640000" not in out and "larger than" not in \
        captured.err
    assert "| 23 x 64 (accumulated) | 64 | 23 |" in out and "| 1438 (one big batch) | 1438 | 1 |" in out
    assert "of the activation arrays of 1438 (" in out and "1/23 = 0.043" in out  # k: the epoch's 23
    record = json.loads((tmp_path / "compare.json").read_text())
    assert [r["micro_batch"] for r in record["runs"]] == [64, 1438, 64]


def test_ctrl_c_in_compare_says_compare_has_no_resume_after_the_bar(tmp_path: Path, capsys: pytest.CaptureFixture,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from minitorch_accum.cli import compare_command

    built = compare_command.build_run

    def interrupted(values: dict) -> tuple:
        learner, train, valid = built(values)
        learner.stop_request.signal = signal.SIGINT  # a Ctrl-C caught before fit: it stops at its first safe point
        return learner, train, valid

    monkeypatch.setattr(compare_command, "build_run", interrupted)
    assert main(["compare", "--dataset", "digits", "--micro-batch", "64", "--accum", "2", "--epochs", "1",
                 "--progress", "rich", "--out", str(tmp_path)]) == 130
    captured = capsys.readouterr()
    bar, said = captured.out.rfind("training (items"), captured.out.find("interrupted: saved")
    assert 0 <= bar < said  # the bar ends before the line that says why, nothing of it after
    last = " ".join(captured.out[said:].split())  # rich wraps it at its console's width
    assert last.endswith("maccum compare has no resume: it starts its three runs afresh, so run it again")
    assert "maccum train --resume" not in captured.out + captured.err and "resume=True" not in captured.out


def test_explain_shows_kernels_and_the_check(capsys: pytest.CaptureFixture) -> None:
    assert main(["explain", "--accum", "3", "--micro-batch", "4"]) == 0
    out = capsys.readouterr().out
    assert "gemm-beta0" in out and "gemm-beta1" in out and "copy_scale" in out
    assert "verdict: EQUAL within rounding" in out and "tolerance 1e-12 for float64" in out
    ran = [line.split("; ", 1)[1] for line in out.splitlines() if line.startswith("micro-batch ")]
    assert [line.split(" ")[0] for line in ran] == ["ran", "ran", "replayed:"]  # captured, checked, replayed
    assert main(["explain", "--accum", "3", "--micro-batch", "4", "--no-replay"]) == 0
    assert capsys.readouterr().out.count("ran eagerly (replay is off)") == 3
    # what bit for bit needs, beyond rounding: this process's fingerprint and the rule
    from minitorch_accum.backend.numerics import BIT_IDENTITY_NEEDS, numerics_fingerprint

    flat = " ".join(out.split())  # wrapped at 110 columns
    assert f"numerics: this process computes with {numerics_fingerprint().describe()}" in flat
    assert BIT_IDENTITY_NEEDS[1:] in flat


def test_explain_shows_the_step_that_folds_the_scale_and_no_pass_that_divides(capsys: pytest.CaptureFixture) -> None:
    assert main(["explain", "--accum", "3", "--micro-batch", "4"]) == 0
    out = capsys.readouterr().out
    flat = " ".join(out.split())  # wrapped at 110 columns
    # the window's 12 items: 1/12, multiplied inside the step's kernel, never by a pass of its own
    assert "-> scale 0.0833333, folded into the optimizer's step (below): no pass over the arena divides it" in flat
    assert ("optimizer step (AdamW): the fused kernel multi_adamw_step (native) read the window's raw sums in the "
            f"arena (1 launch over {64 * 128 + 128 + 128 * 10 + 10:,} elements) and multiplied them by the scale "
            "0.0833333 as it updated the parameters") in flat
    assert "numpy (scale)" not in out and "made apart for this check" in flat
    assert not [line for line in out.splitlines() if line.startswith("    ") and line.split()[1:2] == ["scale"]]


def test_explain_records_the_step_of_the_optimizer_it_is_given() -> None:
    from minitorch_accum.cli.explain_command import explain_window

    report = explain_window("digits", 3, 4, "mean", "gemm", "float64", optimizer="sgd", lr=0.1)
    launches = [e for e in report["trace"].events if e.micro_batch < 0]
    assert [e.kernel for e in launches] == ["multi_sgd_momentum_step"]  # one launch; nothing else passed over
    assert launches[0].scale == 1 / 3 and report["optimizer"] == "SGD"  # mean: 1/k
    assert launches[0].param == "0.weight, 0.bias, 2.weight, 2.bias"


def test_explain_shows_the_mean_bug_on_sequences(capsys: pytest.CaptureFixture) -> None:
    assert main(["explain", "--dataset", "sequences", "--accum", "3", "--micro-batch", "2", "--reduction", "mean",
                 "--dtype", "float64"]) == 0
    out = " ".join(capsys.readouterr().out.split())  # the verdict is wrapped at 110 columns
    assert "verdict: NOT EQUAL" in out and "a mean of means" in out and "different numbers of items: sizes" in out


def test_bad_arguments_exit_with_a_clear_message(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["train", "--accum", "0", "--out", str(tmp_path), "--progress", "none"]) == 2
    assert "--accum (k) must be a positive int, got 0" in capsys.readouterr().err
    assert main(["explain", "--accum", "-1"]) == 2
    assert "--accum (k) must be a positive int, got -1" in capsys.readouterr().err
    assert main(["train", "--out", str(tmp_path / "none"), "--resume", "--progress", "none"]) == 2
    assert "nothing to resume in" in capsys.readouterr().err


@pytest.mark.parametrize(("command", "option", "value", "said"), [
    ("compare", "--accum", "0", "--accum (k) must be a positive int, got 0"),
    ("explain", "--micro-batch", "0", "--micro-batch must be a positive int, got 0"),
    ("train", "--lr", "nan", "--lr must be a positive finite number, got nan"),
    ("train", "--epochs", "two", "--epochs must be a positive int, got 'two'"),
])
def test_a_bad_option_is_named_before_anything_is_written(tmp_path: Path, capsys: pytest.CaptureFixture,
                                                           command: str, option: str, value: str, said: str) -> None:
    out = ["--out", str(tmp_path / "run")] if command != "explain" else []
    assert main([command, option, value, *out, "--progress", "none"][: None if out else -2]) == 2
    err = capsys.readouterr().err
    assert err == f"maccum {command}: error: {said}\n"
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(("args", "usage", "said"), [
    (["compare", "--acum", "8"], "usage: maccum compare ",
     "maccum compare: error: unrecognized arguments: --acum 8 (did you mean --accum?)"),
    (["explain", "--acum=8", "--micro-bach", "4"], "usage: maccum explain ",
     "unrecognized arguments: --acum=8 --micro-bach 4 (did you mean --accum for --acum, --micro-batch for "
     "--micro-bach?)"),
    (["precision", "--modle", "chars"], "usage: maccum precision ", "(did you mean --model?)"),
    (["compre"], "usage: maccum ", "argument command: invalid choice: 'compre', did you mean 'compare'?"),
    (["train", "--dataset", "digts"], "usage: maccum train ", "invalid choice: 'digts', did you mean 'digits'?"),
    (["bugs", "shw"], "usage: maccum bugs ", "invalid choice: 'shw', did you mean 'show'?"),
    (["compare", "--zzzz"], "usage: maccum compare ", "maccum compare: error: unrecognized arguments: --zzzz\n"),
])
def test_a_mistyped_option_or_command_is_answered_by_its_command_with_the_closest(
        capsys: pytest.CaptureFixture, args: list[str], usage: str, said: str) -> None:
    with pytest.raises(SystemExit) as exited:
        main(args)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(usage) and said in err


def test_a_bad_k_names_the_option_once(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit):
        main(["precision", "--k", "0,2"])
    err = capsys.readouterr().err
    assert err.endswith("maccum precision: error: argument --k: each k must be a positive int, got '0' in '0,2'\n")


def _run_piped_into_a_closed_reader(args: list[str]) -> subprocess.CompletedProcess:
    """``maccum ARGS | true``: the reader is gone before the command prints."""
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root)}
    reader_gone = subprocess.Popen([sys.executable, "-m", "minitorch_accum.cli", *args], stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, env=env, cwd=root)
    assert reader_gone.stdout is not None
    reader_gone.stdout.close()
    _, err = reader_gone.communicate(timeout=120)
    return subprocess.CompletedProcess(args, reader_gone.returncode, b"", err)


@pytest.mark.parametrize("args", [["kernels", "list"], ["explain", "--accum", "2"]])
def test_a_closed_pipe_ends_the_command_quietly_as_sigpipe_would(args: list[str]) -> None:
    done = _run_piped_into_a_closed_reader(args)
    assert done.returncode == 128 + signal.SIGPIPE and done.stderr == b"", done.stderr.decode()


def test_maccum_kernels_names_itself_in_its_usage(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as exited:  # argparse's usage error
        main(["kernels"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: maccum kernels ") and "maccum kernels: error:" in err
    assert "python -m minitorch_accum.kernels" not in err


def test_kernels_list_shows_the_passes_traces_name(capsys: pytest.CaptureFixture) -> None:
    from minitorch_accum.kernels import bytes_moved

    assert main(["kernels", "list"]) == 0
    out = capsys.readouterr().out
    for name in ("gemm-beta0", "gemm-beta1", "gemm-fallback", "scale", "container-add", "add_scale"):
        assert f"\n{name} " in out
    assert bytes_moved("gemm-beta1", 10, 4, 4) == 80 and bytes_moved("gemm-beta0", 10, 4, 4) == 40
