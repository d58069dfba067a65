"""maccum generate: text from a trained chars run, the same for a seed, as long as asked, made of the
play's characters only; a run of another task, or no run at all, is refused in one line."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from minitorch_accum.backend import manual_seed
from minitorch_accum.cli import main
from minitorch_accum.cli.tasks import load_task
from minitorch_accum.cli.training_run import make_optimizer
from minitorch_accum.data import CharDataset, DataLoader
from minitorch_accum.train import LearnerBuilder

BLOCK = 8


@pytest.fixture(scope="module")
def chars_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A chars run as maccum train makes it (the task's model, its settings recorded by the builder, a
    checkpoint and final.safetensors), trained on the first 4000 characters so that it takes a second."""
    directory = tmp_path_factory.mktemp("chars_run")
    manual_seed(0)
    task = load_task("chars", block_size=BLOCK)
    head = CharDataset(task.train.ids[:4000], task.train.vocab, BLOCK)
    values = {"dataset": "chars", "block_size": BLOCK, "dtype": "float32", "lr": 0.01, "optimizer": "adamw",
              "grads_accumulation": 2, "seed": 0, "checkpoint_every_steps": 5, "progress": "none"}
    learner = LearnerBuilder(directory).settings(values).build(task.model, make_optimizer("adamw", 0.01))
    learner.fit(DataLoader(head, 32, shuffle=True, seed=0))
    assert (directory / "final.safetensors").is_file() and (directory / "checkpoints" / "latest").is_file()
    return directory


def generate(capsys: pytest.CaptureFixture, *args: str) -> str:
    assert main(["generate", *args]) == 0
    out = capsys.readouterr().out
    assert out.endswith("\n")
    return out[:-1]  # print's newline


def test_a_seed_gives_the_same_text_of_the_length_asked(chars_run: Path, capsys: pytest.CaptureFixture) -> None:
    options = ["--from", str(chars_run), "--prompt", "MENENIUS:", "--tokens", "60", "--seed", "3"]
    first = generate(capsys, *options)
    assert generate(capsys, *options) == first
    assert first.startswith("MENENIUS:") and len(first) == len("MENENIUS:") + 60
    other = generate(capsys, "--from", str(chars_run), "--prompt", "MENENIUS:", "--tokens", "60", "--seed", "4")
    assert other != first and len(other) == len(first)
    assert len(generate(capsys, "--from", str(chars_run), "--tokens", "7")) == 1 + 7  # the default prompt: "\n"


def test_only_characters_of_the_vocabulary_come_out(chars_run: Path, capsys: pytest.CaptureFixture) -> None:
    vocab = set(load_task("chars", block_size=BLOCK).train.vocab)
    text = generate(capsys, "--from", str(chars_run), "--tokens", "300", "--temperature", "2.0", "--top-k", "none")
    assert set(text) <= vocab and len(set(text)) > 10  # a hot, uncut draw reaches many characters


def test_top_k_one_is_the_most_likely_character_whatever_the_seed(chars_run: Path,
                                                                  capsys: pytest.CaptureFixture) -> None:
    greedy = [generate(capsys, "--from", str(chars_run), "--prompt", "the ", "--tokens", "30", "--top-k", "1",
                       "--seed", seed) for seed in ("0", "1")]
    assert greedy[0] == greedy[1]
    sampled = {generate(capsys, "--from", str(chars_run), "--prompt", "the ", "--tokens", "30", "--top-k", "5",
                        "--seed", seed) for seed in ("0", "1", "2")}
    assert len(sampled) > 1


def test_a_run_without_checkpoints_is_recognized_by_its_parameters(chars_run: Path, tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture) -> None:
    shutil.copy(chars_run / "final.safetensors", tmp_path / "final.safetensors")
    options = ["--prompt", "CORIOLANUS:", "--tokens", "40", "--seed", "1"]
    assert generate(capsys, "--from", str(tmp_path), *options) == generate(capsys, "--from", str(chars_run), *options)


def one_line_error(capsys: pytest.CaptureFixture, *args: str) -> str:
    assert main(["generate", *args]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1, captured.err
    return captured.err


def test_a_digits_run_is_refused_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    run = tmp_path / "digits"
    assert main(["train", "--dataset", "digits", "--epochs", "1", "--checkpoint-every", "2", "--out", str(run),
                 "--progress", "none"]) == 0
    capsys.readouterr()
    error = one_line_error(capsys, "--from", str(run))
    assert error.startswith(f"maccum generate: error: {run} is a digits run (its latest checkpoint records "
                            "--dataset digits); maccum generate samples text from a chars run")
    shutil.rmtree(run / "checkpoints")  # without the record, its parameters say it
    assert f"{run} is not a chars run (its final.safetensors holds 0.bias, 0.weight" in \
        one_line_error(capsys, "--from", str(run))


def test_no_run_a_bad_prompt_and_bad_options_are_refused(chars_run: Path, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture) -> None:
    assert f"{tmp_path} holds no final.safetensors: train first" in one_line_error(capsys, "--from", str(tmp_path))
    assert "'#' is not in the vocabulary" in one_line_error(capsys, "--from", str(chars_run), "--prompt", "a#b")
    assert "--prompt needs at least one character" in one_line_error(capsys, "--from", str(chars_run), "--prompt", "")
    assert "--tokens must be a positive int, got 0" in one_line_error(capsys, "--from", str(chars_run), "--tokens", "0")
    assert "--temperature must be a positive finite number, got -1.0" in \
        one_line_error(capsys, "--from", str(chars_run), "--temperature", "-1")


def test_a_prompt_longer_than_the_block_is_read_through_its_last_block(chars_run: Path,
                                                                       capsys: pytest.CaptureFixture) -> None:
    long = "First Citizen:\nBefore we proceed any further, hear me speak."
    text = generate(capsys, "--from", str(chars_run), "--prompt", long, "--tokens", "5", "--top-k", "1")
    tail = generate(capsys, "--from", str(chars_run), "--prompt", long[-BLOCK:], "--tokens", "5", "--top-k", "1")
    assert text == long[:-BLOCK] + tail  # only the last block of context reaches the model


@pytest.mark.parametrize("damage", ["cut short", "overwritten"])
def test_a_damaged_final_file_is_one_sentence_naming_it(chars_run: Path, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture, damage: str) -> None:
    whole = (chars_run / "final.safetensors").read_bytes()
    final = tmp_path / "final.safetensors"
    final.write_bytes(whole[:len(whole) // 2] if damage == "cut short" else b"not a safetensors file at all")
    error = one_line_error(capsys, "--from", str(tmp_path))
    assert error.startswith(f"maccum generate: error: {final} is damaged and cannot be read (")
    assert "cut short or overwritten; restore it, or write it anew with maccum train --dataset chars" in error


def test_a_negative_seed_is_refused_naming_the_option_once(chars_run: Path, capsys: pytest.CaptureFixture) -> None:
    error = one_line_error(capsys, "--from", str(chars_run), "--seed", "-1")
    assert error == "maccum generate: error: --seed must be a non-negative int, got -1\n"
