"""What the checkpoint package says when it refuses: each message whole, naming the checkpoint,
the file and the cause (a user reads these to decide what to delete), and the record's own
fields as a reader of state.json sees them."""

from __future__ import annotations

import errno
import json
import os
import re
import time
from pathlib import Path

import numpy as np
import pytest

from minitorch_accum.train.checkpoint import CheckpointError, FileCheckpointer
from minitorch_accum.train.checkpoint.catalog import read_latest_pointer
from minitorch_accum.train.checkpoint.verified_reading import read_verified_checkpoint


def _arrays() -> dict[str, dict[str, np.ndarray]]:
    return {"model": {"w": np.arange(6, dtype=np.float32).reshape(2, 3)},
            "optimizer": {"w/exp_avg": np.ones(3)}}


def _saved(tmp_path: Path, tag: str = "step-1", state: dict | None = None) -> tuple[FileCheckpointer, Path]:
    ckpt = FileCheckpointer(tmp_path / "ckpt")
    return ckpt, ckpt.save(tag, _arrays(), state if state is not None else {"step": 1})


def _exact(message: str) -> str:
    return f"^{re.escape(message)}$"


def test_the_record_is_utf8_json_indented_by_one_with_its_save_time_in_utc(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("TZ", "Asia/Tokyo")  # nine hours from UTC: a local time would show
    time.tzset()
    try:
        before = time.time()
        _, path = _saved(tmp_path, tag="étape-1", state={"note": "Größe ✓"})
    finally:
        monkeypatch.undo()
        time.tzset()
    raw = (path / "state.json").read_bytes()
    text = raw.decode("utf-8")
    assert '"tag": "étape-1"' in text and "Größe ✓" in text  # not \u escapes
    assert text.startswith('{\n "format"')  # indent=1
    record = json.loads(text)
    import calendar

    saved_at = calendar.timegm(time.strptime(record["saved_at"], "%Y-%m-%dT%H:%M:%SZ"))
    assert abs(saved_at - before) < 120


def test_sequences_count_from_one_and_go_up_by_one(tmp_path: Path) -> None:
    ckpt = FileCheckpointer(tmp_path / "ckpt", keep=3)
    paths = [ckpt.save(f"step-{i}", _arrays(), {"step": i}) for i in range(3)]
    assert [json.loads((p / "state.json").read_bytes())["sequence"] for p in paths] == [1, 2, 3]


def test_checkpoints_go_into_a_directory_made_with_its_parents(tmp_path: Path) -> None:
    ckpt = FileCheckpointer(tmp_path / "runs" / "a" / "checkpoints")
    assert ckpt.save("s", _arrays(), {}).parent == tmp_path / "runs" / "a" / "checkpoints"


def test_a_checkpoint_directory_that_is_a_file_is_named_with_its_kind(tmp_path: Path) -> None:
    blocker = tmp_path / "ckpt"
    blocker.write_text("x")
    with pytest.raises(CheckpointError, match=_exact(f"cannot save checkpoints in {blocker}: {blocker} is a regular "
                                                     "file, not a directory")):
        FileCheckpointer(blocker).save("s", _arrays(), {})
    with pytest.raises(CheckpointError, match=_exact(f"checkpoint directory {blocker} is a regular file, not a "
                                                     "directory")):
        FileCheckpointer(blocker).clear()


def test_a_directory_that_cannot_be_made_says_why(tmp_path: Path, monkeypatch) -> None:
    def refuse(self, *args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(Path, "mkdir", refuse)
    where = tmp_path / "ckpt"
    with pytest.raises(CheckpointError, match=_exact(f"cannot create the checkpoint directory {where}: Permission "
                                                     "denied (EACCES)")):
        FileCheckpointer(where).save("s", _arrays(), {})


def test_a_checkpoint_that_does_not_exist_says_whether_the_pointer_named_it(tmp_path: Path) -> None:
    _, path = _saved(tmp_path)
    gone = path.parent / "nowhere"
    with pytest.raises(CheckpointError, match=_exact(f"checkpoint {gone} does not exist")):
        read_verified_checkpoint(gone, (), None)
    with pytest.raises(CheckpointError, match=_exact(f"checkpoint {gone} does not exist ({path.parent / 'latest'} "
                                                     "points to it)")):
        read_verified_checkpoint(gone, (), path.parent)


def test_a_checkpoint_reached_through_its_directory_must_not_be_a_symlink(tmp_path: Path) -> None:
    _, path = _saved(tmp_path)
    link = path.parent / "alias"
    link.symlink_to(path)
    assert read_verified_checkpoint(link, (), None).arrays["model"]["w"].shape == (2, 3)  # named by the user
    with pytest.raises(CheckpointError, match=_exact(f"checkpoint {link} is a symlink, not a directory")):
        read_verified_checkpoint(link, (), path.parent)


def test_a_checkpoint_without_its_record_or_groups_is_named(tmp_path: Path) -> None:
    _, path = _saved(tmp_path)
    with pytest.raises(CheckpointError, match=_exact(f"checkpoint {path} lacks the group(s) 'accumulator', 'rng' "
                                                     "(it holds 'model', 'optimizer')")):
        read_verified_checkpoint(path, ("model", "accumulator", "rng"), None)
    (path / "state.json").unlink()
    with pytest.raises(CheckpointError, match=_exact(f"checkpoint {path} is missing or incomplete: it has no "
                                                     "state.json")):
        read_verified_checkpoint(path, (), None)


def test_a_checkpoint_that_holds_no_group_says_none(tmp_path: Path) -> None:
    ckpt = FileCheckpointer(tmp_path / "ckpt")
    path = ckpt.save("s", {}, {})
    with pytest.raises(CheckpointError, match=_exact(f"checkpoint {path} lacks the group(s) 'model' (it holds none)")):
        read_verified_checkpoint(path, ("model",), None)


def test_a_missing_or_unreadable_group_file_names_the_checkpoint_and_the_file(tmp_path: Path) -> None:
    _, path = _saved(tmp_path)
    record = json.loads((path / "state.json").read_bytes())
    model_file = record["groups"]["model"]["file"]
    (path / model_file).unlink()
    with pytest.raises(CheckpointError, match=_exact(f"checkpoint {path} is incomplete: {model_file} is missing")):
        read_verified_checkpoint(path, (), None)


def test_an_unreadable_file_of_a_checkpoint_names_the_cause(tmp_path: Path, monkeypatch) -> None:
    from minitorch_accum.train.checkpoint import verified_reading

    _, path = _saved(tmp_path)

    def refuse(file: Path) -> bytes:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(verified_reading, "read_regular_file", refuse)
    with pytest.raises(CheckpointError, match=_exact(f"checkpoint {path}: cannot read state.json: Input/output "
                                                     "error (EIO)")):
        read_verified_checkpoint(path, (), None)


def test_a_group_file_that_is_not_safetensors_is_corrupt_by_name(tmp_path: Path) -> None:
    import hashlib

    _, path = _saved(tmp_path)
    state_file = path / "state.json"
    record = json.loads(state_file.read_bytes())
    model_file = record["groups"]["model"]["file"]
    junk = b"\x08\x00\x00\x00\x00\x00\x00\x00not json"
    (path / model_file).write_bytes(junk)
    # reseal the record around the junk, as a buggy writer would: the checksum matches, the contents do not
    from minitorch_accum.train.checkpoint.record import record_checksum

    record["groups"]["model"].update(bytes=len(junk), sha256=hashlib.sha256(junk).hexdigest())
    body = {k: v for k, v in record.items() if k != "record_sha256"}
    assert "record_sha256" in record
    state_file.write_bytes(json.dumps({**body, "record_sha256": record_checksum(body)}, indent=1).encode())
    with pytest.raises(CheckpointError, match=rf"^checkpoint {re.escape(str(path))} is corrupt: "
                                              rf"{re.escape(model_file)} cannot be read \(.+\)$"):
        read_verified_checkpoint(path, (), None)


@pytest.mark.parametrize(("content", "message"), [
    (b"", "checkpoint pointer {p} is empty"),
    (b"../elsewhere\n", "checkpoint pointer {p} names '../elsewhere', which leaves {d}"),
    (b".tmp-step-1\n", "checkpoint pointer {p} names '.tmp-step-1', a temporary directory"),
    (b"x" * 4097, "checkpoint pointer {p} is corrupt: 4097 bytes long"),
], ids=["empty", "outside", "temporary", "too-long"])
def test_a_bad_pointer_is_refused_by_what_is_wrong(tmp_path: Path, content: bytes, message: str) -> None:
    (tmp_path / "latest").write_bytes(content)
    pointer = tmp_path / "latest"
    with pytest.raises(CheckpointError, match=_exact(message.format(p=pointer, d=tmp_path))):
        read_latest_pointer(tmp_path)


def test_a_pointer_at_the_size_limit_is_read(tmp_path: Path) -> None:
    name = "s" * 4096
    (tmp_path / "latest").write_bytes(name.encode())
    assert read_latest_pointer(tmp_path) == tmp_path / name


def test_a_pointer_that_is_not_utf8_or_not_a_file_is_named(tmp_path: Path) -> None:
    pointer = tmp_path / "latest"
    pointer.write_bytes(b"\xff\xfe")
    with pytest.raises(CheckpointError, match=rf"^checkpoint pointer {re.escape(str(pointer))} cannot be read "
                                              r"\('utf-8' codec can't decode byte 0xff in position 0: .+\)$"):
        read_latest_pointer(tmp_path)
    pointer.unlink()
    pointer.mkdir()
    with pytest.raises(CheckpointError, match=_exact(f"checkpoint pointer {pointer} is a directory, not a regular "
                                                     "file")):
        read_latest_pointer(tmp_path)


def test_a_pointer_that_cannot_be_examined_says_why(tmp_path: Path, monkeypatch) -> None:
    real = os.lstat

    def refuse(path, *args, **kwargs):
        if Path(path).name == "latest":
            raise PermissionError(errno.EACCES, "Permission denied")
        return real(path, *args, **kwargs)

    monkeypatch.setattr(os, "lstat", refuse)
    with pytest.raises(CheckpointError, match=_exact(f"cannot read {tmp_path / 'latest'}: Permission denied "
                                                     "(EACCES)")):
        read_latest_pointer(tmp_path)
